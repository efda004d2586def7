/* tests/test_allocate.c: the arithmetic of ./run sensitivity and allocate (eval/knapsack.c,
 * eval/allocate.c, eval/sensitivity*.c) without a model:
 *   - the knapsack against brute force (every combination) on 3,000 small random instances:
 *     the same feasibility and least damage to the bit; with whole-number damages (many ties)
 *     the very same choice, by the stated tie rule (least weight, then the smaller index in
 *     group 0, 1, ...), also with groups of fewer choices than a row holds (the rest of the row
 *     weighing 0 and damaging least, never chosen); its refusals (NaN damage, negative weight, too many choices, a table too
 *     large);
 *   - exact bits: alloc_spec_bits equals kv_spec_effective_bits for 14 schemes (+res, +sink,
 *     token-axis groups, fp32) at every ctx from 1 to 2,100, in lowest terms, and two by hand;
 *   - --budget values: exact fractions, and the refusals (NaN, negative, 1e3, empty, ...);
 *   - an allocation's LAYERED text parses back to the chosen candidate at every layer (random
 *     choices, 1 to 14 layers), and one that needs more than 16 items is refused;
 *   - the sensitivity's grid: the generated configurations, keys and values apart, recognised
 *     again, and not when one is changed; keys and values with lists of their own (2 key, 1
 *     value candidate: 3 x 2 + 3 x 1 cells, each side's configurations its own candidates);
 *   - the heatmap: K cells left of V cells, each cell's title naming its side, layer, candidate
 *     and KL, the colour scale's ends at the least and the largest KL, 0 drawn grey. */
#include "tests/test.h"
#include "tests/test_random.h"
#include "eval/allocate.h"
#include "eval/sensitivity_chart.h"
#include "eval/knapsack.h"
#include <stdlib.h>
#include <string.h>

/* ---- the knapsack against brute force ---- */

typedef struct {
    int feasible, choice[8];
    double damage;
    long long weight;
} Brute;

/* Every combination in lexicographic order (group 0 the most significant), keeping strictly
 * better ones: the least damage, then the least weight, then the first in that order. */
static Brute brute_force(const Knapsack *k) {
    Brute best = {0};
    int G = k->n_groups, C = k->n_choices, c[8] = {0};
    long long total = 1;
    for (int g = 0; g < G; g++) total *= C;
    for (long long i = 0; i < total; i++) {
        long long x = i;
        for (int g = G - 1; g >= 0; g--) c[g] = (int)(x % C), x /= C;
        long long w = 0;
        int outside = 0;
        for (int g = 0; g < G; g++) {
            w += k->weight[g * C + c[g]];
            if (k->group_choices && c[g] >= k->group_choices[g]) outside = 1;
        }
        if (w > k->capacity || outside) continue;
        double d = knapsack_damage(k, c);
        if (!best.feasible || d < best.damage || (d == best.damage && w < best.weight)) {
            best.feasible = 1, best.damage = d, best.weight = w;
            memcpy(best.choice, c, sizeof c);
        }
    }
    return best;
}

static void test_knapsack_brute_force(void) {
    uint64_t seed = 41;
    int bad_value = 0, bad_choice = 0, bad_feasible = 0, whole = 0, real = 0, infeasible = 0, bad_outside = 0;
    char why[700] = "";
    for (int t = 0; t < 3000; t++) {
        int G = 1 + (int)(uniform(&seed) * 6), C = 1 + (int)(uniform(&seed) * 4), ties = t % 2 == 0;
        long long weight[32], max_sum = 0;
        double damage[32];
        for (int i = 0; i < G * C; i++) {
            weight[i] = (long long)(uniform(&seed) * 13);
            damage[i] = ties ? (double)(int)(uniform(&seed) * 5) : uniform(&seed) * 0.1;
        }
        for (int g = 0; g < G; g++) {
            long long most = 0;
            for (int c = 0; c < C; c++) most = weight[g * C + c] > most ? weight[g * C + c] : most;
            max_sum += most;
        }
        int counts[8];   /* every third instance: groups of 1..C choices, the rest of their row a decoy */
        for (int g = 0; g < G; g++) {
            counts[g] = t % 3 == 1 ? 1 + (int)(uniform(&seed) * C) : C;
            for (int c = counts[g]; c < C; c++) weight[g * C + c] = 0, damage[g * C + c] = -1;
        }
        Knapsack k = {G, C, weight, damage, (long long)(uniform(&seed) * (max_sum + 4)) - 2, t % 3 == 1 ? counts : NULL};
        int choice[8];
        KnapsackResult r;
        Error err;
        if (knapsack_solve(&k, choice, &r, &err)) { snprintf(why, sizeof why, "instance %d: %s", t, err.msg); bad_value++; continue; }
        Brute b = brute_force(&k);
        if (r.feasible != b.feasible) { bad_feasible++; continue; }
        if (!b.feasible) { infeasible++; continue; }
        long long w = 0;
        for (int g = 0; g < G; g++) {
            w += weight[g * C + choice[g]];
            if (choice[g] >= counts[g]) bad_outside++;
        }
        if (r.damage != b.damage || r.damage != knapsack_damage(&k, choice) || w != r.weight || w > k.capacity) {
            if (!bad_value) snprintf(why, sizeof why, "instance %d: damage %.17g, brute force %.17g", t, r.damage, b.damage);
            bad_value++;
        }
        if (ties) {
            whole++;
            if (r.weight != b.weight || memcmp(choice, b.choice, (size_t)G * sizeof *choice)) bad_choice++;
        } else {
            real++;
        }
    }
    check(!bad_value && !bad_feasible && infeasible > 100, "knapsack: least damage = brute force's to the bit on 3000 random instances",
          "%d values, %d feasibility differ (%d infeasible instances): %s", bad_value, bad_feasible, infeasible, why);
    check(!bad_choice && whole > 500, "knapsack: whole-number damages (ties): the same choice as brute force (least weight, then the lowest indices from group 0)",
          "%d of %d differ", bad_choice, whole);
    check(!bad_outside, "knapsack: groups of fewer choices (every third instance): never a choice beyond a group's count, "
          "though those weigh 0 and damage least", "%d chosen", bad_outside);
    check(real > 500 && whole > 500, "knapsack: over 500 feasible instances with real damages and over 500 with whole ones", "%d", real);
}

/* A budget met exactly: the knapsack may use all of it. */
static void test_knapsack_exact_capacity(void) {
    /* 2.25 and 2.75 bits in quarters: four groups at a mean of 2.5 bits take two of each */
    long long w[8] = {9, 11, 9, 11, 9, 11, 9, 11};
    double d[8] = {1.0, 0.5, 1.0, 0.25, 1.0, 0.75, 1.0, 0.125};
    Knapsack k = {4, 2, w, d, 40, NULL};
    int choice[4];
    KnapsackResult r;
    Error err;
    int ok = !knapsack_solve(&k, choice, &r, &err) && r.feasible && r.weight == 40 && choice[0] == 0 && choice[1] == 1 &&
             choice[2] == 0 && choice[3] == 1;
    check(ok, "knapsack: a capacity met exactly is allowed (two 2.75-bit choices in four groups at 2.5 bits)",
          "weight %lld, choice %d %d %d %d", r.weight, choice[0], choice[1], choice[2], choice[3]);
    k.capacity = 39;
    ok = !knapsack_solve(&k, choice, &r, &err) && r.feasible && r.weight == 38 && choice[3] == 1 && choice[1] == 0;
    check(ok, "knapsack: one unit less leaves room for one upgrade only (the most useful)", "weight %lld", r.weight);
    k.capacity = 35;
    check(!knapsack_solve(&k, choice, &r, &err) && !r.feasible, "knapsack: below the lightest choices: not feasible", "");
    k.capacity = 36;
    ok = !knapsack_solve(&k, choice, &r, &err) && r.feasible && r.weight == 36 && choice[0] + choice[1] + choice[2] + choice[3] == 0;
    check(ok, "knapsack: a capacity of exactly the lightest choices takes them (no room left)", "weight %lld", r.weight);
}

static void test_knapsack_refusals(void) {
    long long w[4] = {1, 2, 3, 4};
    double d[4] = {0, NAN, 1, 2};
    int choice[2];
    KnapsackResult r;
    Error err;
    Knapsack k = {2, 2, w, d, 10, NULL};
    check(knapsack_solve(&k, choice, &r, &err) && strstr(err.msg, "not finite"), "knapsack: a NaN damage is refused",
          "%s", err.msg);
    d[1] = 1;
    w[2] = -1;
    check(knapsack_solve(&k, choice, &r, &err) && strstr(err.msg, "< 0"), "knapsack: a negative weight is refused", "%s",
          err.msg);
    long long big[4] = {0, 1LL << 40, 0, (1LL << 40) + 1};
    Knapsack huge = {2, 2, big, d, 1LL << 50, NULL};
    check(knapsack_solve(&huge, choice, &r, &err) && strstr(err.msg, "too fine"), "knapsack: a table beyond its cell limit is refused",
          "%s", err.msg);
    Knapsack none = {0, 2, w, d, 10, NULL};
    check(knapsack_solve(&none, choice, &r, &err) != 0, "knapsack: no groups is refused", "");
    w[2] = 3;
    int counts[2] = {2, 3};
    Knapsack wide = {2, 2, w, d, 10, counts};
    check(knapsack_solve(&wide, choice, &r, &err) && strstr(err.msg, "group 1 has 3 choices"),
          "knapsack: a group of more choices than a row holds is refused", "%s", err.msg);
    counts[1] = 0;
    check(knapsack_solve(&wide, choice, &r, &err) && strstr(err.msg, "group 1 has 0 choices"),
          "knapsack: a group of no choices is refused", "%s", err.msg);
}

/* ---- exact bits ---- */

static long long gcd_of(long long a, long long b) { return b ? gcd_of(b, a % b) : a < 0 ? -a : a; }

static void test_exact_bits(void) {
    static const char *specs[] = {"int4-g64", "int2-g64+had", "tq3", "q8_0", "nuq3-g64", "vq8-d4", "fp8-e4m3",
                                  "int2-t32-asym+res128", "int2-g32-asym+res128", "nuq2-t64+res100", "int4-g64+sink4",
                                  "int3-g64+out1", "fp32", "int2-t64+sink3+res17"};
    int bad = 0, checked = 0;
    char why[300] = "";
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        KvSpec spec;
        char err[160];
        if (kv_spec_parse(specs[i], KV_SIDE_KEYS, &spec, err, sizeof err)) { bad++; snprintf(why, sizeof why, "%s", err); continue; }
        for (int ctx = 0; ctx <= 2100; ctx++) {
            BitsFraction b = alloc_spec_bits(&spec, 64, ctx);
            double want = kv_spec_effective_bits(&spec, 64, ctx);
            checked++;
            if (b.den <= 0 || gcd_of(b.num, b.den) != 1 || fabs((double)b.num / b.den - want) > 1e-12 * want) {
                if (!bad) snprintf(why, sizeof why, "%s at ctx %d: %lld/%lld, want %.17g", specs[i], ctx, b.num, b.den, want);
                bad++;
            }
        }
    }
    check(!bad, "exact bits = kv_spec_effective_bits for 14 schemes at ctx 0..2100, in lowest terms", "%d of %d: %s", bad,
          checked, why);
    KvSpec s;
    char err[160];
    kv_spec_parse("int4-g64", KV_SIDE_KEYS, &s, err, sizeof err);
    BitsFraction a = alloc_spec_bits(&s, 64, 1024);
    kv_spec_parse("int2-t32-asym+res128", KV_SIDE_KEYS, &s, err, sizeof err);
    BitsFraction b = alloc_spec_bits(&s, 64, 1000);   /* 864 positions at 3 bits, 136 at 16: 4768/1000 */
    check(a.num == 17 && a.den == 4 && b.num == 596 && b.den == 125,
          "exact bits by hand: int4-g64 17/4; int2-t32-asym+res128 at ctx 1000 596/125", "%lld/%lld, %lld/%lld", a.num, a.den,
          b.num, b.den);
}

/* ---- budgets ---- */

static void test_budgets(void) {
    static const struct { const char *text; long long num, den; } good[] = {
        {"3", 3, 1}, {"2.5", 5, 2}, {"3.50", 7, 2}, {"0.125", 1, 8}, {"2.333333", 2333333, 1000000}, {".5", 1, 2}, {"999", 999, 1}};
    int bad = 0;
    char why[200];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        BitsFraction b = {0, 0};
        if (alloc_parse_budget(good[i].text, &b, why, sizeof why) || b.num != good[i].num || b.den != good[i].den) bad++;
    }
    check(!bad, "budget: decimals become exact fractions (3, 2.5, 3.50, 0.125, 2.333333, .5, 999)", "%d wrong", bad);
    static const char *refused[] = {"nan", "NaN", "-1", "-0.5", "abc", "", "1e3", "1000", "2.1234567", "+2", "inf", "2..5",
                                    "3 ", "0x10", "."};
    int accepted = 0;
    char which[64] = "";
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        BitsFraction b;
        if (!alloc_parse_budget(refused[i], &b, why, sizeof why)) accepted++, snprintf(which, sizeof which, "'%s'", refused[i]);
    }
    check(!accepted, "budget: NaN, negative, not a number, exponent, >= 1000, 7 decimals, a sign, spaces: refused",
          "%d accepted, e.g. %s", accepted, which);
    BitsFraction list[ALLOC_MAX_BUDGETS];
    char texts[ALLOC_MAX_BUDGETS][32];
    int n = 0;
    int ok = !alloc_parse_budgets("2.5,3,3.5", list, texts, &n, why, sizeof why) && n == 3 && list[2].num == 7 &&
             !strcmp(texts[1], "3") && alloc_parse_budgets("2.5,,3", list, texts, &n, why, sizeof why) &&
             alloc_parse_budgets("1,2,3,4,5,6,7,8,9", list, texts, &n, why, sizeof why);
    check(ok, "budget lists: 2.5,3,3.5 read; an empty item and more than 8 refused", "n %d", n);
}

/* ---- LAYERED text ---- */

static void test_layered_text(void) {
    static const char names[4][SENS_SPEC_LEN] = {"int2-g64+had", "tq3", "q8_0", "nuq2-g64"};
    uint64_t seed = 7;
    int bad = 0;
    char why[1400] = "";
    for (int t = 0; t < 400; t++) {
        int L = 1 + t % 14, choice[14];
        for (int l = 0; l < L; l++) choice[l] = (int)(uniform(&seed) * (t % 3 == 0 ? 2 : 4));
        char text[512];
        Error err;
        KvLayered parsed;
        char perr[160];
        if (alloc_layered_text(choice, L, names, text, sizeof text, &err)) continue;   /* too many items: below */
        if (kv_layered_parse(text, KV_SIDE_VALUES, &parsed, perr, sizeof perr) ||
            kv_layered_bind(&parsed, L, 64, KV_SIDE_VALUES, perr, sizeof perr)) {
            bad++;
            snprintf(why, sizeof why, "'%s': %s", text, perr);
            continue;
        }
        for (int l = 0; l < L; l++)
            if (strcmp(kv_layered_at(&parsed, l)->text, names[choice[l]])) {
                if (!bad) snprintf(why, sizeof why, "'%s' layer %d: %s, want %s", text, l, kv_layered_at(&parsed, l)->text,
                                   names[choice[l]]);
                bad++;
                break;
            }
    }
    check(!bad, "LAYERED text of 400 random choices (1-14 layers) parses back to the chosen candidate at every layer", "%d: %s",
          bad, why);
    int two[6] = {1, 1, 0, 1, 2, 2};
    char text[512];
    Error err;
    check(!alloc_layered_text(two, 6, names, text, sizeof text, &err) && !strcmp(text, "tq3;2:int2-g64+had;4-5:q8_0"),
          "LAYERED text: the most used candidate is the base, runs become L1-L2 items", "'%s'", text);
    int alternating[40];
    for (int l = 0; l < 40; l++) alternating[l] = l % 2;
    check(alloc_layered_text(alternating, 40, names, text, sizeof text, &err) && strstr(err.msg, "items"),
          "LAYERED text: an allocation needing more than 16 items is refused", "%s", err.msg);
}

/* ---- the sensitivity's grid ---- */

static void test_grid(void) {
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    SensGrid g = {0}, back;
    Error err;
    int ok = s.configs && !sens_parse_candidates(" tq2 , int4-g64+had", &g, &err) && g.n_candidates[SENS_KEYS] == 2 &&
             g.n_candidates[SENS_VALUES] == 2;
    g.n_layers = 3;
    ok = ok && !sens_add_configs(&s, &g, &err) && s.n_configs == 12;
    const SweepConfig *k11 = &s.configs[sens_config_index(&g, SENS_KEYS, 1, 1)];
    const SweepConfig *v20 = &s.configs[sens_config_index(&g, SENS_VALUES, 2, 0)];
    ok = ok && !strcmp(k11->k_text, "fp32;1:int4-g64+had") && !strcmp(k11->v_text, "fp32") && !strcmp(v20->k_text, "fp32") &&
         !strcmp(v20->v_text, "fp32;2:tq2");
    check(ok, "grid: K layer 1 int4-g64+had is keys fp32;1:int4-g64+had, values fp32; V layer 2 tq2 the other way round",
          "%s / %s", s.configs ? k11->k_text : "", s.configs ? v20->v_text : "");
    ok = ok && sens_grid_of(&s, &back) && back.n_layers == 3 && back.n_candidates[SENS_KEYS] == 2 &&
         back.n_candidates[SENS_VALUES] == 2 && !strcmp(back.candidates[SENS_VALUES][1], "int4-g64+had");
    check(ok, "grid: a sensitivity's configurations are recognised (3 layers, 2 candidates)", "");
    if (s.configs) snprintf(s.configs[7].v_text, sizeof s.configs[7].v_text, "fp32;1:tq2");
    check(s.configs && !sens_grid_of(&s, &back), "grid: one configuration changed: not a sensitivity", "");
    SensGrid bad = {0};
    int refused = sens_parse_candidates("tq2,tq2", &bad, &err) && sens_parse_candidates("", &bad, &err) &&
                  sens_parse_candidates("fp32;1:tq2", &bad, &err) && sens_parse_candidates("int5-g64", &bad, &err) &&
                  sens_parse_candidates("int4-g64+prerope", &bad, &err);
    check(refused, "grid: candidates twice, empty, per-layer, unknown, or for keys only are refused", "");
    free(s.configs);
}

/* Keys and values with their own lists: 2 key candidates (one for keys only), 1 value candidate. */
static void test_grid_sides(void) {
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    SensGrid g = {0}, back;
    Error err;
    int ok = s.configs && !sens_parse_side_candidates("tq2,pca2+prerope", SENS_KEYS, &g, &err) &&
             !sens_parse_side_candidates("nuq3-g64", SENS_VALUES, &g, &err) && g.n_candidates[SENS_KEYS] == 2 &&
             g.n_candidates[SENS_VALUES] == 1 && !sens_same_candidates(&g);
    g.n_layers = 3;
    ok = ok && !sens_add_configs(&s, &g, &err) && s.n_configs == 3 * 2 + 3 * 1 && sens_cell_count(&g) == 9;
    check(ok, "grid of own lists: 3 layers x 2 key candidates + 3 layers x 1 value candidate = 9 configurations", "%d",
          s.configs ? s.n_configs : -1);
    int bad = 0;
    for (int side = 0; ok && side < 2; side++)
        for (int layer = 0; layer < 3; layer++)
            for (int c = 0; c < g.n_candidates[side]; c++) {
                const SweepConfig *sc = &s.configs[sens_config_index(&g, side, layer, c)];
                char want[128];
                snprintf(want, sizeof want, "fp32;%d:%s", layer, g.candidates[side][c]);
                if (strcmp(side ? sc->v_text : sc->k_text, want) || strcmp(side ? sc->k_text : sc->v_text, "fp32")) bad++;
            }
    check(ok && !bad, "grid of own lists: each cell's configuration is its side's candidate at its layer, the other side fp32",
          "%d wrong", bad);
    ok = ok && sens_grid_of(&s, &back) && back.n_layers == 3 && back.n_candidates[SENS_KEYS] == 2 &&
         back.n_candidates[SENS_VALUES] == 1 && !strcmp(back.candidates[SENS_KEYS][1], "pca2+prerope") &&
         !strcmp(back.candidates[SENS_VALUES][0], "nuq3-g64");
    check(ok, "grid of own lists: recognised again (3 layers, 2 key and 1 value candidates)", "");
    SensGrid bad_grid = {0};
    check(sens_parse_side_candidates("tq2,pca2+prerope", SENS_VALUES, &bad_grid, &err) && strstr(err.msg, "--v-candidates") &&
          strstr(err.msg, "keys only"), "grid of own lists: a value candidate with +prerope is refused, naming --v-candidates",
          "%s", err.msg);
    free(s.configs);
}

/* ---- the heatmap ---- */

static void test_heatmap(void) {
    SensGrid g = {3, {2, 2}, {{"tq2", "q8_0"}, {"tq2", "q8_0"}}};
    double kl[12], bits[2] = {2.25, 8.5};
    for (int i = 0; i < 12; i++) kl[i] = 1e-4 * (i + 1) * (i + 1);
    kl[sens_config_index(&g, SENS_VALUES, 1, 1)] = 0;   /* drawn grey */
    char *svg = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&svg, &len);
    int rc = f ? sens_write_heatmap_svg(f, "test", &g, kl, bits, bits) : -1;
    if (f) fclose(f);
    int cells = 0, bad_title = 0, max_k_x = -1, min_v_x = 1 << 30, bad_ends = 0;
    for (const char *p = svg; rc == 0 && (p = strstr(p, "<rect class=\"cell\"")); p++) {
        int x;
        char fill[8], side, cand[16];
        int layer;
        double v;
        if (sscanf(p, "<rect class=\"cell\" x=\"%d\" y=\"%*d\" width=\"%*d\" height=\"%*d\" fill=\"#%6s", &x, fill) != 2 ||
            sscanf(strstr(p, "<title>"), "<title>%c layer %d %15[^:]: KL %lf", &side, &layer, cand, &v) != 4) {
            bad_title++;
            continue;
        }
        cells++;
        int c = !strcmp(cand, "q8_0"), s = side == 'V';
        double want = kl[sens_config_index(&g, s, layer, c)];
        if (fabs(v - want) > 1e-5 * want) bad_title++;
        if (s) min_v_x = x < min_v_x ? x : min_v_x;
        else max_k_x = x > max_k_x ? x : max_k_x;
        if (want == kl[11] && strcmp(fill, "fde725")) bad_ends++;          /* the largest: yellow */
        if (want == kl[0] && strcmp(fill, "181254")) bad_ends++;           /* the least: dark blue */
        if (want == 0 && strcmp(fill, "cccccc")) bad_ends++;
    }
    check(rc == 0 && cells == 12 && !bad_title, "heatmap: 12 cells, each titled with its side, layer, candidate and KL", "%d cells, %d bad",
          cells, bad_title);
    check(cells == 12 && max_k_x < min_v_x, "heatmap: every K cell is left of every V cell", "K up to x %d, V from %d", max_k_x,
          min_v_x);
    check(cells == 12 && !bad_ends, "heatmap: the largest KL yellow, the least dark blue, KL 0 grey", "%d wrong", bad_ends);
    free(svg);
    /* own lists: 2 key candidates, 1 value candidate; the V panel's one column after the K panel's two */
    SensGrid own = {2, {2, 1}, {{"tq2", "q8_0"}, {"nuq3-g64"}}};
    double kl6[6] = {1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3}, vbits[1] = {3.25};
    svg = NULL, len = 0;
    f = open_memstream(&svg, &len);
    rc = f ? sens_write_heatmap_svg(f, "own", &own, kl6, bits, vbits) : -1;
    if (f) fclose(f);
    int v_cells = 0, k_cells = 0, wrong = 0;
    for (const char *p = svg; rc == 0 && (p = strstr(p, "<title>")); p++) {
        char side, cand[16];
        int layer;
        double v;
        if (sscanf(p, "<title>%c layer %d %15[^:]: KL %lf", &side, &layer, cand, &v) != 4) continue;
        int s = side == 'V', c = s ? 0 : !strcmp(cand, "q8_0");
        if (s) v_cells++, wrong += strcmp(cand, "nuq3-g64") != 0;
        else k_cells++;
        if (fabs(v - kl6[sens_config_index(&own, s, layer, c)]) > 1e-9) wrong++;
    }
    check(rc == 0 && k_cells == 4 && v_cells == 2 && !wrong && strstr(svg, "3.25 bits"),
          "heatmap of own lists: 4 K cells (2 candidates), 2 V cells (nuq3-g64, its 3.25 bits), each its own KL",
          "%d K, %d V, %d wrong", k_cells, v_cells, wrong);
    free(svg);
}

int main(void) {
    test_knapsack_exact_capacity();   /* first: an off-by-one in the capacity is named here, not found as a crash */
    test_knapsack_brute_force();
    test_knapsack_refusals();
    test_exact_bits();
    test_budgets();
    test_layered_text();
    test_grid();
    test_grid_sides();
    test_heatmap();
    return test_exit_code();
}
