/* SPDX-License-Identifier: MIT */
/*
 * The merge kernel (src/dsp.h's wsum): y += sum_p w[p] x[p], one FMA per
 * part and element, written once for every fixed-width ISA. Four vectors of
 * y at a time, each its own chain over the parts, so the FMAs overlap;
 * every part is read once, y loaded and stored once.
 *
 * The including file defines first: MG_KERNEL (the kernel's name),
 * mg_vf (an f32 vector), MG_LANES, mg_load(p), mg_store(p, a), mg_set1(x),
 * mg_fma(a, b, c) (a * b + c, one rounding), and
 *   mg_tail(y, x, w, parts, n, j)   the elements j .. n-1 (fewer than 4 vectors)
 */

static void MG_KERNEL(float *y, const float *const *x, const float *w, size_t parts, size_t n)
{
    size_t j = 0;
    for (; j + 4 * MG_LANES <= n; j += 4 * MG_LANES) {
        mg_vf a0 = mg_load(y + j), a1 = mg_load(y + j + MG_LANES);
        mg_vf a2 = mg_load(y + j + 2 * MG_LANES), a3 = mg_load(y + j + 3 * MG_LANES);
        for (size_t p = 0; p < parts; p++) {
            const mg_vf vw = mg_set1(w[p]);
            const float *xp = x[p] + j;
            a0 = mg_fma(vw, mg_load(xp), a0);
            a1 = mg_fma(vw, mg_load(xp + MG_LANES), a1);
            a2 = mg_fma(vw, mg_load(xp + 2 * MG_LANES), a2);
            a3 = mg_fma(vw, mg_load(xp + 3 * MG_LANES), a3);
        }
        mg_store(y + j, a0);
        mg_store(y + j + MG_LANES, a1);
        mg_store(y + j + 2 * MG_LANES, a2);
        mg_store(y + j + 3 * MG_LANES, a3);
    }
    mg_tail(y, x, w, parts, n, j);
}
