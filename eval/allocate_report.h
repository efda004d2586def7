/* eval/allocate_report.h: what ./run allocate prints and writes (eval/allocate_report.c), from
 * an allocation's results alone (eval/allocation.h). */
#ifndef KVQ_ALLOCATE_REPORT_H
#define KVQ_ALLOCATE_REPORT_H

#include "eval/allocation.h"

/* The choices, and with v (NULL: no check) the check's table, as text or JSON on f;
 * alloc_write_report writes both as allocation.md and allocation.json into dir. */
void alloc_print(FILE *f, const Alloc *a, const Verify *v, int json);
int alloc_write_report(const char *dir, const Alloc *a, const Verify *v, Error *err);

#endif
