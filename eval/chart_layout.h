/* eval/chart_layout.h: the sweep chart's layout, decided apart from drawing it (eval/chart.c
 * draws): which points are on each panel's Pareto front, and where each point's number goes in
 * a panel — a box that covers no marker and no other number, stays inside the panel and is
 * nearer to its own marker than to any other, with a leader line when it had to move away. Only
 * eval/chart.c includes it. */
#ifndef KVQ_CHART_LAYOUT_H
#define KVQ_CHART_LAYOUT_H

#include "eval/chart.h"

#define MARKER_R 4.0        /* a point's marker: a circle of this radius */

typedef struct { double x0, y0, x1, y1; } Box;

/* The front of panel `which` (0: bits and KL, 1: bits and delta ppl) among the points with
 * mask[i] set (mask NULL: all points), as chart_pareto_front says; front[i] = 1 on it. */
void chart_front_among(const ChartPoint *p, int n, const unsigned char *mask, int which, unsigned char *front);

/* A panel whose numbers are being placed. */
typedef struct {
    Box area;                       /* the panel's plot area: numbers stay 1 unit inside it */
    const double *mx, *my;          /* per point: its marker's centre in this panel */
    const unsigned char *shown;     /* per point: drawn (the others have no marker) */
    int n;
    Box *boxes;                     /* obstacles: markers, rings, bars, the numbers placed so far */
    int n_boxes;
} NumberRoom;

/* Where a number goes: its point i at (px, py), its box's size, whether other markers touch its own. */
typedef struct {
    int i, touching;
    double px, py, w, h;
} Placing;

/* How many other drawn points' markers lie within `radius` units of point i. */
int chart_neighbours(const NumberRoom *r, int i, double radius);
/* The free box nearest to q's point (chart_layout.c says how it is searched); 0 when there is none. */
int chart_find_room(const NumberRoom *r, const Placing *q, Box *out);
/* The leader line a number in box b gets from its marker at (px, py), from the marker's edge to
 * the box's nearest point, into seg (x0 y0 x1 y1); 0 when it sits beside the marker and needs none. */
int chart_leader(double px, double py, Box b, int touching, double seg[4]);

#endif
