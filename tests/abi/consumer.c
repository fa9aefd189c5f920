/* SPDX-License-Identifier: MIT */
/*
 * A program built the way a user builds one: only <attn.h> and the flags of
 * `pkg-config --cflags --libs attn`, against the installed library.
 *
 * One head, q_len 2, kv_len 3, head_dim 2, causal (bottom-right aligned:
 * query 0 sees keys 0..1, query 1 sees keys 0..2), checked against a
 * double-precision softmax computed here.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <attn.h>

#define LQ 2
#define LK 3
#define D 2

int main(void)
{
    const uint32_t v = attn_version();
    if ((v >> 16) != ATTN_VERSION_MAJOR || v < ATTN_VERSION) {
        fprintf(stderr, "consumer: built against %d.%d.%d, loaded %s (0x%06x)\n",
                ATTN_VERSION_MAJOR, ATTN_VERSION_MINOR, ATTN_VERSION_PATCH,
                attn_version_string(), (unsigned)v);
        return 1;
    }

    float q[LQ][D] = { { 0.5f, -1.0f }, { 1.5f, 0.25f } };
    float k[LK][D] = { { 1.0f, 0.0f }, { -0.5f, 2.0f }, { 0.25f, 0.75f } };
    float v_[LK][D] = { { 1.0f, 2.0f }, { -3.0f, 0.5f }, { 4.0f, -1.0f } };
    float out[LQ][D];
    memset(out, 0xff, sizeof out); /* NaN: rows left unwritten fail below */

    const attn_shape shape = { 1, 1, 1, LQ, LK, D, 0 };
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    const attn_tensor tq = { q, ATTN_DTYPE_F32, LQ * D, LQ * D, D };
    const attn_tensor tk = { k, ATTN_DTYPE_F32, LK * D, LK * D, D };
    const attn_tensor tv = { v_, ATTN_DTYPE_F32, LK * D, LK * D, D };
    const attn_tensor to = { out, ATTN_DTYPE_F32, LQ * D, LQ * D, D };

    attn_status st = attn_forward(&shape, &opt, &tq, &tk, &tv, &to, NULL);
    if (st != ATTN_OK) {
        fprintf(stderr, "consumer: attn_forward: %s\n", attn_strerror(st));
        return 1;
    }
    if (attn_forward(&shape, &opt, NULL, &tk, &tv, &to, NULL) != ATTN_ERR_NULL) {
        fprintf(stderr, "consumer: attn_forward(q = NULL) did not report ATTN_ERR_NULL\n");
        return 1;
    }

    const double scale = 1.0 / sqrt((double)D);
    int bad = 0;
    for (int i = 0; i < LQ; i++) {
        const int visible = i + (LK - LQ) + 1;
        double s[LK], m = -INFINITY, sum = 0.0;
        for (int j = 0; j < visible; j++) {
            s[j] = scale * ((double)q[i][0] * k[j][0] + (double)q[i][1] * k[j][1]);
            m = s[j] > m ? s[j] : m;
        }
        for (int j = 0; j < visible; j++)
            sum += exp(s[j] - m);
        for (int c = 0; c < D; c++) {
            double o = 0.0;
            for (int j = 0; j < visible; j++)
                o += exp(s[j] - m) / sum * v_[j][c];
            /* f32 arithmetic on values of magnitude <= 4: a few ulps of 4. */
            if (!(fabs(out[i][c] - o) <= 1e-5)) {
                fprintf(stderr, "consumer: out[%d][%d] = %.9g, expected %.9g\n", i, c,
                        (double)out[i][c], o);
                bad = 1;
            }
        }
    }
    if (!bad)
        printf("consumer: libattn %s, isa %s: attn_forward matches\n", attn_version_string(),
               attn_isa_name(attn_isa_active()));
    return bad;
}
