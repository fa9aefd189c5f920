/* SPDX-License-Identifier: MIT */
/*
 * Error bounds used by every comparison in the test suite, derived once from
 * f32 rounding and the documented accuracy of the elementary functions, and
 * never widened to make a test pass.
 *
 * Notation: u = 2^-24 is the unit roundoff of binary32 (round to nearest), so
 * one correctly rounded operation has relative error <= u, and "k ulp" of a
 * normal result y is at most 2*k*u*|y| (ulp(y) <= 2u|y|).
 * gamma(n) = n*u / (1 - n*u) bounds the relative error of any n-term sum or
 * dot product, in ANY order (pairwise, blocked, vector lanes, with or without
 * FMA): |fl(sum x_i) - sum x_i| <= gamma(n-1) * sum |x_i| (Higham, "Accuracy
 * and Stability of Numerical Algorithms", 2nd ed., eq. 3.5 and §3.1). We use
 * gamma(n), one more term, so that one extra multiplication (a scale) is
 * covered.
 *
 * Every bound is an error bound of ONE f32 implementation against the exact
 * (float64) result. Two implementations that both satisfy it differ by at
 * most the sum of their bounds: that is what the ISA-vs-scalar comparisons
 * use (TOL_PAIR).
 *
 * What each bound is, and why:
 *
 *  exact (bitwise):  to_f32 (F16/BF16 -> f32 is exact), row_max (max is
 *                    exact), row_scale and add_bias (one IEEE operation per
 *                    element), mask_bool and every mask (-inf exactly where
 *                    hidden, the input bits untouched elsewhere).
 *
 *  qk_tile:  |s - s*| <= gamma(d+1) * |scale| * sum_t |q_t k_t|
 *            standard dot-product bound (the task's "c*d*eps*sum|q k|" with
 *            c = 1/2 in units of FLT_EPSILON = 2u); the +1 covers the scale
 *            multiply, wherever the kernel applies it (on q, on k or on s).
 *
 *  pv_tile:  |acc - acc*| <= gamma(nk+1) * (|acc0| + sum_c |p_c v_c|)
 *            nk products accumulated onto the initial accumulator.
 *
 *  exp:      TOL_EXP_ULP ulp. glibc's expf is < 1 ulp (it is correctly
 *            rounded in most cases: libm-test-ulps lists 1 for x86_64 and
 *            aarch64); SLEEF's *_u10 functions are <= 1.0 ulp by their name.
 *            A kernel with its own exp must meet the same 1 ulp.
 *            Results below FLT_MIN may be flushed or lose relative accuracy
 *            (SLEEF and polynomial exps build the result by exponent
 *            scaling), so every exp-derived value also gets an absolute
 *            floor of TOL_TINY per term: such values are below 2^-126 and
 *            cannot move any sum that contains the row's maximum term 1.
 *  log:      TOL_LOG_ULP ulp (glibc logf < 1 ulp; SLEEF logf_u10 1.0 ulp).
 *  tanh:     TOL_TANH_ULP ulp (glibc tanhf: 2 ulp in libm-test-ulps;
 *            SLEEF tanhf_u10: 1.0 ulp).
 *
 *  exp_sum:  x_j = exp(fl(x_j - max)): the subtraction is one IEEE operation
 *            (identical in every ISA), its rounding u*|x_j - max| moves the
 *            exp by that relative amount; then the exp's ulp:
 *              |e_j - e_j*| <= (u*|x_j - max| + 2*TOL_EXP_ULP*u) * e_j* + TOL_TINY
 *            sum: gamma(n) * sum e_j + sum of the element bounds.
 *            weighted = sum e_j (x_j - max), all terms <= 0, same sign:
 *              gamma(n+1) * sum |e_j (x_j-max)| + sum |x_j-max| * |e_j - e_j*|.
 *
 *  softcap:  y = cap * tanh(x / cap). The argument x/cap (or x * fl(1/cap))
 *            carries <= 2u relative error, which moves tanh by at most
 *            2u*|x/cap|*(1 - t^2); then tanh's ulp and the final multiply:
 *              |y - y*| <= (2*TOL_TANH_ULP + 1) * u * |y*| + 2u*|x|*(1 - t^2)
 *            and an error e0 already in x passes through scaled by the
 *            largest slope of y over [x - e0, x + e0] (mean value theorem),
 *            1 - tanh^2(max(|x| - e0, 0) / cap): 1 - t^2 at x itself is only
 *            first order, which the f32 errors meet but the precision
 *            modes' (2^-7 relative) do not.
 *
 *  bias:     s + b adds u*|s + b| and passes the error of s unchanged.
 *
 *  softmax_bwd: dot = sum p_i dp_i: gamma(n) sum |p_i dp_i|; then
 *            ds_j = p_j*(dp_j - dot) (or p_j*dp_j - p_j*dot with FMA):
 *              |ds_j - ds_j*| <= |p_j| * gamma(n) * sum|p_i dp_i|
 *                               + 3u * (|p_j dp_j| + |p_j dot|).
 *
 *  softmax of a row (weights, lse, max_score, entropy) given score errors
 *  E_j (from the bounds above) and n visible keys:
 *    input part:   p changes by exp(ds_j - dlse), dlse = log sum_k p_k e^(ds_k)
 *                  in [-sum_k p_k E_k, log sum_k p_k e^(E_k)] (Jensen), so
 *                  the relative change is at most expm1(E_j + Ebar) with
 *                  Ebar = log sum_k p_k e^(E_k): rigorous for errors of any
 *                  size, and sum_k p_k E_k to first order;
 *                  dlse <= Ebar; |dmax| <= max E_j;
 *                  dH <= sum_j p_j |log p_j| (E_j + Ebar), times e^(Emax+Ebar)
 *                  to cover the second-order terms.
 *    computation:  a_j = u|s_j - m| + 2*TOL_EXP_ULP*u        (exp of s_j - m)
 *                  r_l = gamma(n) + sum_j p_j a_j + R*c_R     (the sum l)
 *                  p_j: a_j + r_l + 2u + R*c_R                (1/l and multiply)
 *                  lse: r_l/(1-r_l) + 2*TOL_LOG_ULP*u*|log l| + u|lse|
 *                  H = log l + W/l, W = sum e_j (m - s_j) >= 0: relative
 *                  error of W gamma(n+1) + max a_j + 2u + R*c_R, then the
 *                  division and the final add.
 *    R is the number of running-max rescales of an online softmax (one per
 *    key block, plus the merge of split-KV partial results); each costs one
 *    exp of the max difference and one multiply: c_R = (2*TOL_EXP_ULP + 2)*u
 *    relative on everything accumulated before it. The subtraction errors
 *    of s_j - m_1, m_1 - m_2, ... telescope to u*|s_j - m| (already in a_j).
 *    (weights are not online: R = 0.)
 *
 *  forward:  o_t = sum_j p_j v_jt:
 *              |o_t - o_t*| <= sum_j p_j |v_jt| (rel_p_j + gamma(n) + R*c_R)
 *                              + u|o_t| + TOL_TINY * sum_j |v_jt|
 *            with rel_p_j the weight's relative bound above.
 *
 *  default scale: 1/sqrt(head_dim) rounded to f32 (sqrt and division: 2u),
 *            adds 2u*|s| to each score when opt->scale == 0.
 *
 *  gradual underflow (no FTZ/DAZ anywhere in the library): the model above
 *            is fl(a op b) = (a op b)(1 + d), |d| <= u, which holds for a
 *            normal result only. With subnormals it is (Higham §2.1)
 *              fl(a * b) = (a * b)(1 + d) + e,  |e| <= eta = 2^-150
 *            (half the spacing 2^-149 of the subnormals; the same for an
 *            FMA's single rounding), while a sum or difference that lands in
 *            the subnormal range is exact (e = 0). So each rounded product
 *            adds eta absolutely, times every factor it is multiplied by
 *            afterwards; the later roundings scale that by (1 + u)^k
 *            <= 1 + gamma(k), covered by the factor 2 below wherever k <= n.
 *   qk:      d products, + 1 for the scale multiply at the end (eta, times
 *            1), or, where a kernel folds the scale into q (or k) first,
 *            fl(q_t * scale) errs by eta and is then multiplied by k_t:
 *            eta * |k_t| per term (or |q_t|). Covering all three placements:
 *              E_qk = 2 * eta * (d * (1 + |scale|) + 1 + sum_t max(|q_t|, |k_t|))
 *   softcap: z = x * fl(1/cap): fl(1/cap) is a quotient, subnormal when
 *            cap > 2^126 (eta absolute), so z errs by |x| * eta + eta beyond
 *            the relative terms; tanh moves by slope (<= 1) times that; a
 *            subnormal tanh result is only good to TOL_TANH_ULP of the
 *            subnormal spacing 2^-149 = 2 eta; cap * t adds eta:
 *              E_cap = eta * (cap * (slope * (|x| + 1) + 2 * TOL_TANH_ULP) + 1)
 *            (times 2 for the later roundings, as above).
 *   pv:      o = (sum_j e_j v_j) * (1/l) or sum_j p_j v_j: n products, R
 *            rescale multiplies and the final normalisation, each eta and
 *            each multiplied afterwards by factors <= 1 (e_j, 1/l, rescales):
 *              E_pv = 2 * eta * (n + R + 2)
 *   softmax_bwd: dot gets n * eta; ds_j = p_j (dp_j - dot) multiplies it by
 *            |p_j| and adds eta (2 eta for p_j dp_j - p_j dot with FMA):
 *              E_bwd = 2 * eta * (n * |p_j| + 2)
 *   softmax: weights carry TOL_TINY >> eta already; lse = m + log l with
 *            l >= 1 cannot underflow; max_score is a max of scores (their
 *            E_qk and E_cap pass through unchanged). Entropy: each term
 *            e_j (m - s_j) of W is a product (eta) and its e_j may be below
 *            FLT_MIN (TOL_TINY absolute, see exp above), so W, and H = log l
 *            + W / l with l >= 1, get sum_j (TOL_TINY * (m - s_j) + eta).
 *
 *  backward (attn_backward; tests/ref/ref_backward.c computes these per element).
 *            Inputs: the scores the backward recomputes carry the score bound
 *            E_ij above (qk_tile, softcap, bias); in the bf16 mode (attn.h,
 *            attn_precision) E_ij gains that mode's score terms, |scale| (B
 *            (1 + gamma(d+1)) sum_t |q_t k_t| + 2^-126 (sum_t max(|q_t|,
 *            |k_t|) + d)), B = REF_BF16_B, and step 7's products dS'_j k_jt
 *            are rounded (dS' and k to bfloat16): dq_t gains |scale| sum_j
 *            (B (|dS'_j| + S'_j)|k_jt| + 2^-126 (|k_jt| + |dS'_j| + S'_j +
 *            1)), the flush of a subnormal factor or sum included (the 1:
 *            vdpbf16ps and BFDOT flush a subnormal result), and its gamma part
 *            takes the products' (1 + B); step 8's dS'_i q_it and step 9's
 *            p_i dO_it alike (dk_t: |scale| sum_i (B (|dS'_i| + S'_i)|q_it|
 *            + 2^-126 (|q_it| + |dS'_i| + S'_i + 1)); dv_t: sum_i (B (p_i +
 *            pe_i)|dO_it| + 2^-126 (|dO_it| + p_i + pe_i + 1))); dP and D
 *            stay f32. The
 *            lse and output it is
 *            handed come from an f32 forward, and their ACTUAL distance to
 *            the float64 forward is used: L_i = |lse^ - lse|, |O^ - O|
 *            (so the test bounds the backward alone). dO, q, k, v are exact.
 *            Steps, with a = dP - D and exact p, dP, D:
 *    1. p^ = exp(fl(s^ - lse^)): the argument is off by E + L plus its own
 *       rounding u|s^ - lse^|, then exp's ulp:
 *         Delta = E + L + u(|s - lse| + E + L)
 *         |p^ - p| <= pe = p (exp(Delta)(1 + 2*TOL_EXP_ULP*u) - 1) + TOL_TINY
 *    2. dP^ = dO.V (qk_tile, scale 1): F = gamma(dv+1) sum_t |dO_t V_jt|.
 *    3. D^ = dO.O^ (qk_diag: summed in dP's order, so one visible key
 *       gives a^ = 0 exactly; tests/ops/test_backward.c checks that apart):
 *         G = sum_t |dO_t| |O^_t - O_t| + gamma(dv+1) sum_t |dO_t O^_t|.
 *    4. a^ = fl(dP^ - D^):  A = F + G + u(|a| + F + G).
 *    5. dS^ = fl(p^ a^) (score_grad; this is dbias):
 *         S = pe (|a| + A) + p A + u (p + pe)(|a| + A).
 *    6. softcap: dS' = dS (1 - t^2), t = capped / cap computed as
 *       fl(capped^ * fl(1/cap)). With C the capped score's bound (softcap
 *       above), T = C/cap + 3u(|t| + C/cap) bounds t^; 1 - t^2 in f32:
 *         Gg = (2|t| + T) T + 2u((|t| + T)^2 + (1 - t^2))
 *         S' = S (g + Gg) + |dS| Gg + u (|dS| + S)(g + Gg),  g = 1 - t^2.
 *       Without softcap S' = S. Near |t| = 1 the bound is absolute, ~u:
 *       f32 cannot hold 1 - t^2 better there.
 *    7. dq_t = scale sum_j dS'_j k_jt over at most Lk terms (pv_tile, in
 *       blocks, any order), then the scale multiply; gamma(Lk + 4) covers the
 *       sum, that multiply and the default scale's 2u rounding:
 *         |scale| (sum_j S'_j |k_jt| + gamma(Lk+4) sum_j (|dS'_j| + S'_j)|k_jt|)
 *    8. dk_jt: the same with q over the group's rows, summed as dv_jt is
 *       (9): gamma(K + 3), the 3 for the scale multiply and the default
 *       scale's 2u as in 7.
 *    9. dv_jt = sum_i p_ij dO_it (pt_tile) over the n = group * Lq rows:
 *         sum_i pe_ij |dO_it| + gamma(K) sum_i (p_ij + pe_ij)|dO_it|,
 *       K the most roundings one term meets, derived from how the driver
 *       sums (src/driver/backward.c). dk and dv start at exact zero; the
 *       rows are cut into query blocks of at most R rows (the plan's
 *       block_rows), and each pt_tile call, on a run of one block's rows,
 *       sums them from zero and adds that sum to the element once
 *       (src/dsp.h). Inside a call of c <= R rows a term is rounded at
 *       most c times: its product (or its FMA), then once per later row
 *       (an FMA, or an add; a product-and-add chain adds the first
 *       product to zero exactly, so it too rounds at most c times). Then
 *       once per call's addition from its own on, the first of which lands
 *       on zero exactly: at most M - 1 more, M the calls that add to the
 *       element. So
 *         K = R + M - 1,
 *       which for a long sequence (M about n / R) grows like R + n / R: the
 *       rows per block plus the blocks, not n. M counts the pieces into
 *       which block boundaries and the rows that do not reach the element
 *       (a hidden score: p = dS = 0, and adding a zero product is exact)
 *       cut the rows that do, in the plan's order (one head's rows, or the
 *       group's position by position: attn_bwd_plan_blocks, src/internal.h).
 *       The rows of one piece all see the element's key, so the driver's
 *       runs (the rows of a block that see the key block) keep them in one
 *       call. Counting rows instead: inside its call a term meets at most
 *       one rounding per row from its own on, plus one (its product's, in
 *       a product-and-add chain); of the additions of call sums, each later
 *       call's comes with a row the term never met, and its own call's is
 *       exact for the first call and else comes with a row of an earlier
 *       call. So K <= n + 1, one chain's bound, too:
 *         K = min(n + 1, R + M - 1)       (tol_bwd_kv_count);
 *       a test without the plan's blocks (the fuzzers) takes n + 1.
 *            Rows without a visible key (lse = -inf) and hidden scores give
 *            exactly 0 in both (bound 0). When out is handed in F16/BF16 its
 *            rounding dominates D and so dS, dq, dk: that error is taken in
 *            exactly, so such comparisons use up to ~0.999 of the bound;
 *            what is left is the f32 rounding terms, each rigorous. Bounds
 *            are first order in u only where stated (exp(Delta)); every
 *            other step is the rigorous forward-error bound of its
 *            operation. Gradual underflow, in the model below: the scores
 *            get E_qk and E_cap; each product that may land among the
 *            subnormals adds eta, times the factors applied after it, and
 *            the later roundings are covered by a factor 2:
 *              dS:  2 eta (2 dv + 2)   (dP's and D's dv products, p * a)
 *              dS': that + 2 eta (2 + |dS|)   (t * t, dS * g)
 *              dq_t: |scale| sum_j (dS'_eta |k_jt| + 2 eta) + 2 eta, dk alike
 *              dv_t: 2 eta n   (the n products p * dO)
 *
 *  pt_tile:  acc[c] += sum_r p[r][c] x[r]: nq products summed from zero, then
 *            that sum added to the accumulator (src/dsp.h): a term rounds at
 *            most nq + 1 times, acc0 once, so as pv_tile
 *            |acc - acc*| <= gamma(nq+1) (|acc0| + sum_r |p_rc x_r|); and the
 *            result is acc0 plus, in one f32 addition, what the call gives
 *            on a zero accumulator (tests/kernels/checkasm.c checks that of every
 *            kernel, bit for bit).
 *  score_grad: fl(p fl(dp - d)): two roundings, <= (2u + u^2)|p (dp - d)|;
 *            the same two IEEE operations in every ISA, so bitwise equal.
 */
#ifndef ATTN_TEST_TOLERANCE_H
#define ATTN_TEST_TOLERANCE_H

#include <float.h>
#include <math.h>

#include "attn.h" /* ATTN_DTYPE_F16: the 16-bit outputs' bounds */

#define TOL_U (FLT_EPSILON / 2.0) /* 2^-24 */
#define TOL_TINY ((double)FLT_MIN)

#define TOL_EXP_ULP 1.0
#define TOL_LOG_ULP 1.0
#define TOL_TANH_ULP 2.0

/* Relative cost of one online-softmax rescale (exp of the max difference and
 * one multiply). */
#define TOL_RESCALE ((2.0 * TOL_EXP_ULP + 2.0) * TOL_U)

static inline double tol_gamma(double n)
{
    return n * TOL_U / (1.0 - n * TOL_U);
}

/* Half the spacing of the subnormals: the absolute error of a product that
 * rounds into the subnormal range ("gradual underflow" above). */
#define TOL_ETA 0x1p-150

static inline double tol_under_qk(double d, double abs_scale, double sum_max_qk)
{
    return 2.0 * TOL_ETA * (d * (1.0 + abs_scale) + 1.0 + sum_max_qk);
}

static inline double tol_under_softcap(double cap, double x, double slope)
{
    return 2.0 * TOL_ETA * (cap * (slope * (fabs(x) + 1.0) + 2.0 * TOL_TANH_ULP) + 1.0);
}

static inline double tol_under_pv(double n, double rescales)
{
    return 2.0 * TOL_ETA * (n + rescales + 2.0);
}

static inline double tol_under_bwd(double n, double abs_p)
{
    return 2.0 * TOL_ETA * (n * abs_p + 2.0);
}

/*
 * The per-element bounds of the kernels, as derived above, for every test
 * that checks a kernel (tests/kernels/test_kernels.c, tests/kernels/checkasm.c).
 */
/* qk_tile: mag = sum_t |q_t k_t|, folded = sum_t max(|q_t|, |k_t|) */
static inline double tol_qk(double d, double abs_scale, double mag, double folded)
{
    return tol_gamma(d + 1.0) * abs_scale * mag + tol_under_qk(d, abs_scale, folded);
}

/* pv_tile (and the backward's pt_tile): n products onto an accumulator;
   mag = |acc0| + sum |p v| */
static inline double tol_pv(double n, double mag)
{
    return tol_gamma(n + 1.0) * mag + tol_under_pv(n, 0.0);
}

/* The backward's dk and dv ("backward", step 9): the most roundings a term
   meets when n rows reach the element in `calls` pt_tile calls of at most
   `rows` rows each; calls < 1: not counted, one chain's n + 1. */
static inline double tol_bwd_kv_count(double n, double rows, double calls)
{
    const double blocked = rows + calls - 1.0;
    return calls >= 1.0 && blocked < n + 1.0 ? blocked : n + 1.0;
}

/* exp_sum's element: e = exp(x - max) exactly, shifted = fl(x - max) */
static inline double tol_exp(double shifted, double e)
{
    return (TOL_U * fabs(shifted) + 2.0 * TOL_EXP_ULP * TOL_U) * e + TOL_TINY;
}

/* softcap of a finite x: y = cap * t exactly, t = tanh(x / cap) */
static inline double tol_softcap(double cap, double x, double t)
{
    return (2.0 * TOL_TANH_ULP + 1.0) * TOL_U * fabs(cap * t) +
           2.0 * TOL_U * fabs(x) * (1.0 - t * t) + tol_under_softcap(cap, x, 1.0 - t * t);
}

/* Two implementations each within `bound` of the exact value. */
#define TOL_PAIR(bound) (2.0 * (bound))

/*
 * Score modifiers (sinks, ALiBi, two-sided windows):
 *
 *  alibi:    y = x - slope * d, d = |i + Lk - Lq - j| an integer. The kernel
 *            converts d to f32 (exact below 2^24, else relative error <= u),
 *            then either rounds the product slope * fl(d) (<= u) and the
 *            subtraction (<= u), or fuses both into one FMA (one rounding).
 *            With a = slope * d exact and y* = x - a:
 *              fl(d) = d (1 + d1), fl(slope fl(d)) = a (1 + d1)(1 + d2),
 *              |a (1+d1)(1+d2) - a| <= (2u + u^2) |a|,
 *              then the subtraction adds u * |y* + that| <= u|y*| + u(2u + u^2)|a|,
 *            in all (2u + u^2)(1 + u) |a| + u |y*| <= TOL_ALIBI_A * u * |a| + u |y*|
 *            (TOL_ALIBI_A = 3 > (2 + u)(1 + u)). An error e0 already in x
 *            passes through unchanged. FMA kernels meet it with room (only
 *            the conversion and one rounding).
 *
 *  sinks:    the sink logit z is one more softmax entry, exact (error 0), with
 *            no value: the row bounds above apply to the n + 1 entries (its
 *            exp is computed by expf: the same TOL_EXP_ULP; its term joins the
 *            sum: gamma(n + 1)). An online softmax seeded with the sink may
 *            rescale once more than without it (on the first key block):
 *            the forward tests already count R = blocks + 1.
 *
 *  windows:  masks only: exact.
 */
#define TOL_ALIBI_A 3.0

/*
 * Merging partial results (split-KV inside attn_forward, and attn_merge).
 *
 *  wsum:     y' = y + w_1 x_1 + ... + w_k x_k accumulated left to right, one
 *            multiply-add per part, fused or not: a dot product of k terms
 *            on top of y, each product rounded at most once and carried
 *            through at most k additions, so (Higham 3.1)
 *              |y' - y*| <= gamma(k + 1) (|y| + sum_p |w_p x_p|) + k TOL_TINY
 *            (TOL_TINY: a product below FLT_MIN is off by at most 2^-150).
 *
 *  split-KV forward: each chunk runs the online softmax on its keys and the
 *            chunks are combined with the online rescale (one exp of
 *            m_c - M and one multiply per chunk, then additions). Chunks
 *            start at multiples of 256, which every block_k divides, so a
 *            key meets at most (blocks of its chunk - 1) rescales inside the
 *            chunk plus the merge: at most the R of the unsplit forward, and
 *            the sums keep n terms in another association (gamma(n) holds for
 *            any order). The forward bound above applies unchanged. A sink
 *            seeds chunk 0 only: its extra rescale (sinks, below) falls in a
 *            chunk with fewer blocks than the whole, so R still holds.
 *
 *  shared prefix (attn.h, "Shared prefixes"): a group's prefix is attended
 *            in chunks of ATTN_PREFIX_CHUNK keys counted from key 0, each an
 *            online softmax whose state is merged into the row's (one
 *            rescale per chunk), then the row's own keys continue that
 *            online softmax from the first block boundary at or below P.
 *            A prefix key of chunk c meets at most (blocks of c - 1) + 1 +
 *            (blocks of the own keys) rescales, a split of the own keys
 *            trading one of its chunk-0 blocks for the split's merge; the
 *            block holding key P counts in both, so that is at most the
 *            blocks of the sequence + 1: the R the forward tests use. The
 *            sums keep their terms, in another association. The forward
 *            bound applies unchanged (tests/ops/test_shared_prefix.c).
 *
 *  attn_merge of n partials (o_i, L_i) given with errors |o_i - o_i*| <= E_i
 *            and |L_i - L_i*| <= l_i against exact partials whose exact
 *            merge is o* = sum W_i* o_i*, W_i* = exp(L_i* - L*),
 *            L* = log sum exp L_i*:
 *    weights from perturbed L: log W_i - log W_i* = (L_i - L_i*) - (L - L*)
 *            and log-sum-exp moves by at most max_k l_k, so
 *              |W_i / W_i* - 1| <= expm1(l_i + l_max) =: rho_i;
 *    rounding of the weights: computed in double (exp, a sum of n terms, a
 *            division: (n + 4) * 2^-52 relative) then rounded to f32 (u):
 *              eps_w = u + (n + 4) * 2^-52;
 *    accumulation: o = sum w_i o_i by wsum from 0: a dot product,
 *            gamma(n) * sum |w_i o_i|;
 *    together, with c_i = (1 + rho_i)(1 + eps_w)(1 + gamma(n)):
 *      |o - o*| <= sum_i W_i* ((c_i - 1) |o_i*| + c_i E_i)
 *                  + TOL_TINY * (n + sum_i (|o_i*| + E_i))
 *            (TOL_TINY: a weight or product below FLT_MIN rounds absolutely);
 *    L = m + log(sum exp(L_i - m)) in double, rounded to f32:
 *      |L - L*| <= l_max (1 + u) + (u + (n + 4) * 2^-52) (|L*| + l_max + log n + 1)
 *            (|m| <= |L| + log n).
 *  Exact inputs (E_i = l_i = 0) give the merge's own rounding.
 */
#define TOL_MERGE_DOUBLE 0x1p-52 /* one double rounding, relative, with margin 2 */

/* wsum of k parts onto y; abs_sum = |y| + sum_p |w_p x_p|. */
static inline double tol_wsum(double k, double abs_sum)
{
    return tol_gamma(k + 1.0) * abs_sum + k * TOL_TINY;
}

/*
 * Quantized K/V (Q8_0, Q4_0, FP8 E4M3 and E5M2; tests/kernels/test_quant.c, the
 * quant fuzzer): NO bound of their own. Decoding is exact in f32: q * d has
 * at most 8 + 11 significant bits (Q8_0), 4 + 11 (Q4_0; (n - 8) * d computed
 * as n * d + (-8 d) is exact as well, the result being representable), an
 * E4M3 value 4 bits, an E5M2 value 3 (a binary16, exact in f32 down to its
 * subnormals); so after the load a kernel does the f32 arithmetic
 * the bounds above describe, on inputs that are exactly the decoded values,
 * and the float64 reference computed from those values gets the F32 bounds
 * unchanged. The FP8 scales add no term either: k_scale enters as the
 * f32 product fl(scale * k_scale), which the reference uses as its scale
 * (attn.h documents the score as (q . e4m3) * fl(scale * k_scale), a
 * normal float). v_scale (a normal float) multiplies the normalised output:
 * one more rounding of the result, so the reference's output and bound are
 * multiplied by v_scale (in double: a relative 2^-53, far below any f32
 * bound) and the bound gains TOL_VSCALE_REL * u * |o| for that rounding,
 * plus TOL_VSCALE_ABS for a result that falls into the subnormal range
 * (half the spacing there, 2^-150, instead of a relative error).
 */
#define TOL_VSCALE_REL 1.0
#define TOL_VSCALE_ABS 0x1p-150

/*
 * Per-row FP8 scales (attn.h 1.6, attn_options.k_scales / v_scales): k's
 * enter each score as fl32(scale * k_scales_j), one f32 product computed
 * before the score is, which the reference (tests/ref/ref.c) uses as that
 * key's scale: the score is then the per-call score above with another
 * scale, and its bound is the same formula with |fl32(scale * k_scales_j)|
 * (the qk_tile rounds once, as with one scale for every key). v's: the
 * weight p^_j (the f32 weight, with the error exp_sum's bound gives it) is
 * multiplied by v_scales_j before it multiplies V's row, one more
 * rounding of that term: fl(p^_j s_j) = p^_j s_j (1 + d_j), |d_j| <= u, so
 * the term p_j |s_j v_j| of the weighted sum's bound gains TOL_VSCALES_REL
 * * u, and a product that falls below the normal range is off by at most
 * half the subnormal spacing, TOL_ETA, times |v_j|. The reference's value
 * is sum_j p_j s_j v_j / l exactly (s_j v_j in double).
 */
#define TOL_VSCALES_REL 1.0

/*
 * FP8 scales per group of channels (attn.h 1.8, k_scale_group /
 * v_scale_group), and key rows with a tail (1.9). Two ways compute them
 * (src/driver/forward.c, "Rows in segments"), one bound covers both.
 * Notation: key j's column t has the decoded value k_t (exact), its
 * group's scale s_t, the factor f_t = fl32(scale * s_t) (the f32 scale of
 * the call: the default one rounded, or opt->scale), for a tail column f_t
 * = scale and s_t = 1; S segments (groups, and the tail), L_i values in
 * segment i, so L_i + S - 1 <= d. The reference (tests/ref/ref.c, group_score)
 * is x = sum_t f_t q_t k_t, M = sum_t |f_t q_t k_t|.
 *  - Segments (the forward over dense keys): per segment the kernel's dot
 *    with scale 1 (gamma(L_i + 1)), times f_i (u), summed over S segments
 *    (gamma(S - 1)): (1 + gamma(L_i+1))(1 + u)(1 + gamma(S-1)) <= 1 +
 *    gamma(L_i + S + 1) <= 1 + gamma(d + 2) on each term of M.
 *  - Staged (top-k lists, the bf16 and int8 modes, groups under 64
 *    channels or more than 8 a row, attn_scores and attn_weights):
 *    k'_t = fl32(k_t s_t) = k_t s_t
 *    (1 + a), then the F32 kernel with the scale (gamma(d+1)); and f_t =
 *    scale s_t (1 + b): (1 + gamma(d+1))(1 + u)^2 / (1 - u) <= 1 +
 *    gamma(d + 4) on each term of M.
 * So |score - x| <= gamma(d + 4) M plus the absolute terms below the
 * normal range: the segments' kernels' (2 eta (2 L + 1 + sum max(|q|,
 * |k|)) per segment, tol_under_qk with scale 1, times |f_i|; 3 >= 2L+1 per
 * value), doubled for the later roundings, and eta per product and sum
 * (d + 1 of them); the staged kernels' tol_under_qk(d, |scale|, sum
 * max(|q_t|, |k'_t|)) with |k'_t| <= 2 |k_t s_t| + eta; and a staged value
 * below the normal range, off by eta, times |scale q_t|. The bf16 mode
 * (staged) adds its rounding of the staged values (REF_BF16_B on
 * |scale| sum |q_t k'_t| <= |scale| (1 + 4u) sum |q_t k_t s_t|).
 * V: each weight of a group's columns is fl32(p_j s_jg) (segments) or
 * each value fl32(s_jg v_jt) (staged): one more relative u on the term
 * p_j |s_jg v_jt| either way, as per-row scales (TOL_VSCALES_REL), and
 * below the normal range eta |v_jt| (segments) or eta p_j <= eta
 * (staged): eta max(1, |v_jt|). Against the f32 values fl32(fp8 * s) of
 * 1.8's statement each value is itself within u of fp8 * s.
 */

/*
 * 16-bit outputs (attn_forward's and attn_merge's out in F16 or BF16): the
 * operation computes its f32 row o32 exactly as for an F32 out (the same
 * bits: the tests check it bit for bit) and rounds each element once, to
 * nearest even, into the out dtype. With p the format's precision (11
 * significant bits for F16, 8 for BF16) and u_h = 2^-p, a value in the
 * format's normal range rounds with |h - o32| <= u_h |o32| (2^e <= |o32|,
 * the half spacing there is 2^(e-p)). With |o32 - o| <= E, the F32 bound
 * against the exact o:
 *   |h - o| <= E + u_h |o32| <= E + u_h (|o| + E) = (1 + u_h) E + u_h |o|,
 * which attn.h states as "the F32 bound plus one rounding, u_h |o|". Below
 * the normal range the rounding is absolute instead: half the subnormal
 * spacing, 2^-25 for F16 (spacing 2^-24) and 2^-134 for BF16 (2^-133),
 * added as TOL_OUT16_ABS. F16 overflows: a |o32| that rounds to 2^16 or
 * more (>= 65520) becomes +-inf, which no finite bound covers; an element
 * whose |o| + E reaches 65504 (the largest F16) gets bound +inf
 * (unspecified), and the tests draw values far below it. BF16 has f32's
 * range: an f32 row cannot overflow it except by rounding FLT_MAX up,
 * which the same rule covers. NaN stays NaN; infinities stay themselves.
 */
#define TOL_OUT16_U(dtype) ((dtype) == ATTN_DTYPE_F16 ? 0x1p-11 : 0x1p-8)
#define TOL_OUT16_ABS(dtype) ((dtype) == ATTN_DTYPE_F16 ? 0x1p-25 : 0x1p-134)

/* The bound of a 16-bit out element whose F32 result has bound err against
   the exact value want (a finite want). */
static inline double tol_out16(int dtype, double want, double err)
{
    const double u = TOL_OUT16_U(dtype);
    if (dtype == ATTN_DTYPE_F16 && fabs(want) + err >= 65504.0)
        return INFINITY; /* may round to +-inf */
    return (1.0 + u) * err + u * fabs(want) + TOL_OUT16_ABS(dtype);
}

#endif /* ATTN_TEST_TOLERANCE_H */
