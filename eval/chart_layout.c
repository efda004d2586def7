/* eval/chart_layout.c: the sweep chart's layout before any drawing (see eval/chart_layout.h):
 * the Pareto fronts, and a box for each point's number found by searching around its marker. */
#include "eval/chart_layout.h"
#include <math.h>

#define PI 3.14159265358979323846

/* --- the fronts ------------------------------------------------------------------------------- */

/* A KL of -1e-12 is rounding, not a better configuration than one with KL 0. */
static double kl_key(const ChartPoint *p) { return p->kl_mean < 0 ? 0 : p->kl_mean; }

/* The value a panel ranks points by (lower is better): KL (which 0) or delta ppl % (which 1). */
static double quality(const ChartPoint *p, int which) { return which ? p->dppl_pct : kl_key(p); }

static int takes_part(const ChartPoint *p, int which) {
    return isfinite(p->bits) && isfinite(which ? p->dppl_pct : p->kl_mean);
}

static int dominates(const ChartPoint *a, const ChartPoint *b, int which) {
    double qa = quality(a, which), qb = quality(b, which);
    return a->bits <= b->bits && qa <= qb && (a->bits < b->bits || qa < qb);
}

void chart_front_among(const ChartPoint *p, int n, const unsigned char *mask, int which, unsigned char *front) {
    for (int i = 0; i < n; i++) {
        front[i] = takes_part(&p[i], which) && (!mask || mask[i]);
        for (int j = 0; j < n && front[i]; j++)
            if (j != i && takes_part(&p[j], which) && (!mask || mask[j]) && dominates(&p[j], &p[i], which)) front[i] = 0;
    }
}

void chart_pareto_front(const ChartPoint *points, int n, unsigned char *front) {
    chart_front_among(points, n, NULL, 0, front);
}

void chart_pareto_front_dppl(const ChartPoint *points, int n, unsigned char *front) {
    chart_front_among(points, n, NULL, 1, front);
}

/* --- the points' numbers, placed by their boxes ------------------------------------------------- */

static int overlaps(const NumberRoom *r, Box b) {
    for (int i = 0; i < r->n_boxes; i++) {
        const Box *o = &r->boxes[i];
        if (b.x0 < o->x1 && o->x0 < b.x1 && b.y0 < o->y1 && o->y0 < b.y1) return 1;
    }
    return 0;
}

static int inside(Box b, Box area) {
    return b.x0 >= area.x0 + 1 && b.x1 <= area.x1 - 1 && b.y0 >= area.y0 + 1 && b.y1 <= area.y1 - 1;
}

/* The box of a number w wide centred at (cx, cy): a line of text's box, 1 unit of padding around. */
static Box box_at(double cx, double cy, double w, double h) {
    Box b = {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2};
    return b;
}

/* Rings of distance from the marker's edge, and directions (degrees, counter-clockwise from
 * right: beside the point first, then above and below, then the diagonals). */
static const double RINGS[] = {0, 3, 7, 12, 18, 26, 36, 48, 64, 84, 110, 140, 180, 230, 290, 360, 450, 560, 700, 860};
static const double ANGLES[] = {0, 180, 90, 270, 45, 135, 315, 225, 22.5, 157.5, 337.5, 202.5, 67.5, 112.5, 292.5, 247.5};
#define N_RINGS (int)(sizeof RINGS / sizeof RINGS[0])
#define N_ANGLES (int)(sizeof ANGLES / sizeof ANGLES[0])
#define TOUCHING_RING 3     /* RINGS[3], 12 units: the first ring a leader line shows at */

/* Beside the marker means within 6 units of its edge, or 2 when other markers touch this one:
 * which of them a number beside them belongs to is not clear then. */
int chart_leader(double px, double py, Box b, int touching, double seg[4]) {
    double nx = fmin(fmax(px, b.x0), b.x1), ny = fmin(fmax(py, b.y0), b.y1), dist = hypot(nx - px, ny - py);
    if (!(dist > MARKER_R + 6 || (touching && dist > MARKER_R + 2))) return 0;
    double s = (MARKER_R + 1) / dist;
    seg[0] = px + (nx - px) * s, seg[1] = py + (ny - py) * s, seg[2] = nx, seg[3] = ny;
    return 1;
}

/* 1 if the segment seg (x0 y0 x1 y1) passes through box b (the slab method). */
static int segment_meets(const double seg[4], Box b) {
    double t0 = 0, t1 = 1, p[2] = {seg[0], seg[1]}, d[2] = {seg[2] - seg[0], seg[3] - seg[1]};
    double lo[2] = {b.x0, b.y0}, hi[2] = {b.x1, b.y1};
    for (int k = 0; k < 2; k++) {
        if (fabs(d[k]) < 1e-12) {
            if (p[k] < lo[k] || p[k] > hi[k]) return 0;
            continue;
        }
        double ta = (lo[k] - p[k]) / d[k], tb = (hi[k] - p[k]) / d[k];
        t0 = fmax(t0, fmin(ta, tb)), t1 = fmin(t1, fmax(ta, tb));
        if (t0 > t1) return 0;
    }
    return 1;
}

/* 1 if box b is free for q's number: inside the panel, on no obstacle, nearer to its own marker than
 * to any other, and its leader line (if it gets one) through no other marker. Markers on this one's
 * place (within 2 units) are left out of both: a number there is theirs as much. */
static int room_for(const NumberRoom *r, const Placing *q, Box b) {
    if (!inside(b, r->area) || overlaps(r, b)) return 0;
    double seg[4] = {0}, own = hypot(fmin(fmax(q->px, b.x0), b.x1) - q->px, fmin(fmax(q->py, b.y0), b.y1) - q->py);
    int line = chart_leader(q->px, q->py, b, q->touching, seg);
    for (int j = 0; j < r->n; j++) {
        if (j == q->i || !r->shown[j]) continue;
        double x = r->mx[j], y = r->my[j];
        if (hypot(x - q->px, y - q->py) <= 2) continue;
        Box m = {x - MARKER_R, y - MARKER_R, x + MARKER_R, y + MARKER_R};
        if (hypot(fmin(fmax(x, b.x0), b.x1) - x, fmin(fmax(y, b.y0), b.y1) - y) < own) return 0;
        if (line && segment_meets(seg, m)) return 0;
    }
    return 1;
}

/* The free box nearest to q's point: around it ring by ring (from a line's length away when other
 * markers touch it), else anywhere in the panel on a grid of 4 units. 0 when there is none. */
int chart_find_room(const NumberRoom *r, const Placing *q, Box *out) {
    for (int ring = q->touching ? TOUCHING_RING : 0; ring < N_RINGS; ring++)
        for (int a = 0; a < N_ANGLES; a++) {
            double ux = cos(ANGLES[a] * PI / 180), uy = -sin(ANGLES[a] * PI / 180), g = MARKER_R + 1 + RINGS[ring];
            Box b = box_at(q->px + ux * (g + q->w / 2), q->py + uy * (g + q->h / 2), q->w, q->h);
            if (room_for(r, q, b)) { *out = b; return 1; }
        }
    double best = INFINITY;
    for (double cy = r->area.y0 + 1 + q->h / 2; cy <= r->area.y1 - 1 - q->h / 2; cy += 4)
        for (double cx = r->area.x0 + 1 + q->w / 2; cx <= r->area.x1 - 1 - q->w / 2; cx += 4) {
            Box b = box_at(cx, cy, q->w, q->h);
            double dist = hypot(cx - q->px, cy - q->py);
            if (dist < best && room_for(r, q, b)) best = dist, *out = b;
        }
    return best < INFINITY;
}

int chart_neighbours(const NumberRoom *r, int i, double radius) {
    int k = 0;
    double x = r->mx[i], y = r->my[i];
    for (int j = 0; j < r->n; j++)
        k += j != i && r->shown[j] && hypot(r->mx[j] - x, r->my[j] - y) < radius;
    return k;
}
