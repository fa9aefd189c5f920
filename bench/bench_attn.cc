/* SPDX-License-Identifier: MIT */
/*
 * libattn benchmarks: scores, softmax and forward (prefill and decode), and
 * the exp_sum kernel (every kernel: tests/kernels/checkasm.c), on every ISA table of the
 * registry this build and CPU run (through attn_*_with, single-threaded:
 * opt.parallel_for = NULL), beside what a C user writes today (OpenBLAS
 * sgemm/sgemv + a SLEEF softmax loop, x86-64 only) and the memory references
 * (memcpy, one read of K and V), in one run. Decode runs on 1 and 2 threads
 * and reads K/V copies rotated out of the last-level cache, beside a plain
 * read of the same bytes (bm_decode) and against the roofline T* of that
 * floor and the FMA peak measured in the same process (x86-64). mask_apply,
 * weights and softmax_backward are not benchmarked.
 *
 * Counters: flops (kIsRate, so FLOP/s): 2*Lq*Lk*d per head for scores,
 * 4*Lq*Lk*d per query head for forward/decode, causal counting only the
 * unmasked (query, key) pairs, for the baselines too; bytes (B/s) for
 * softmax: read + write of the table once.
 *
 * The scalar forward is slow: its forward benchmarks use L=512 (named so)
 * and one iteration.
 */
#include "../tools/pin.h"
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "shim.h"
#if BENCH_X86_BASELINE
#include "baseline.h"
#endif

#if BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* The composition baselines need both OpenBLAS and the AVX2 SLEEF loop. */
#define BENCH_COMPOSITION (BENCH_HAVE_OPENBLAS && BENCH_X86_BASELINE)

namespace {

/* ------------------------------------------------------------ buffers */

template <typename T> struct Buffer {
    T *p = nullptr;
    size_t n = 0;
    explicit Buffer(size_t count) : n(count)
    {
        size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
        p = static_cast<T *>(std::aligned_alloc(64, bytes ? bytes : 64));
        if (!p)
            std::abort();
        std::memset(p, 0, bytes);
    }
    ~Buffer() { std::free(p); }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
};

void fill_uniform(float *x, size_t n, float lo, float hi, unsigned seed)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (size_t i = 0; i < n; i++)
        x[i] = dist(rng);
}

/* IEEE binary16, round to nearest even (finite, normal-range inputs here). */
uint16_t to_half(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffffu;
    if (exp <= 0) { /* subnormal half or zero */
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    uint32_t h = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent: still correct */
    return (uint16_t)(sign | h);
}

attn_tensor tensor(void *data, attn_dtype dtype, int64_t heads, int64_t rows, int64_t cols)
{
    attn_tensor t;
    t.data = data;
    t.dtype = dtype;
    t.row_stride = cols;
    t.head_stride = rows * cols;
    t.batch_stride = heads * rows * cols;
    return t;
}

/* (query, key) pairs a causal mask leaves visible for Lq == Lk == L. */
double causal_pairs(int64_t L) { return (double)L * (double)(L + 1) / 2.0; }

void set_flops(benchmark::State &state, double flops_per_iter)
{
    state.counters["flops"] = benchmark::Counter(flops_per_iter * (double)state.iterations(),
                                                 benchmark::Counter::kIsRate);
}

void set_bytes(benchmark::State &state, double bytes_per_iter)
{
    state.counters["bytes"] = benchmark::Counter(bytes_per_iter * (double)state.iterations(),
                                                 benchmark::Counter::kIsRate);
}

bool have_avx2() { return attn_dsp_for_isa(ATTN_ISA_AVX2) != nullptr; }

/* ------------------------------------------------------------ scores */

void bm_scores(benchmark::State &state, const attn_dsp *dsp, int64_t L, int64_t d)
{
    Buffer<float> q(L * d), k(L * d), s(L * L);
    fill_uniform(q.p, q.n, -1, 1, 1);
    fill_uniform(k.p, k.n, -1, 1, 2);
    attn_shape shape = {1, 1, 1, L, L, d, d};
    attn_tensor tq = tensor(q.p, ATTN_DTYPE_F32, 1, L, d), tk = tensor(k.p, ATTN_DTYPE_F32, 1, L, d);
    attn_tensor ts = tensor(s.p, ATTN_DTYPE_F32, 1, L, L);
    for (auto _ : state) {
        if (attn_scores_with(dsp, &shape, nullptr, &tq, &tk, &ts) != ATTN_OK)
            state.SkipWithError("attn_scores failed");
        benchmark::DoNotOptimize(s.p);
        benchmark::ClobberMemory();
    }
    set_flops(state, 2.0 * L * L * d);
}

#if BENCH_HAVE_OPENBLAS
void bm_scores_sgemm(benchmark::State &state, int64_t L, int64_t d)
{
    Buffer<float> q(L * d), k(L * d), s(L * L);
    fill_uniform(q.p, q.n, -1, 1, 1);
    fill_uniform(k.p, k.n, -1, 1, 2);
    float scale = 1.0f / std::sqrt((float)d);
    for (auto _ : state) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)L, (int)L, (int)d, scale, q.p,
                    (int)d, k.p, (int)d, 0.0f, s.p, (int)L);
        benchmark::DoNotOptimize(s.p);
        benchmark::ClobberMemory();
    }
    set_flops(state, 2.0 * L * L * d);
}
#endif

/* ------------------------------------------------------------ softmax */

void bm_softmax(benchmark::State &state, const attn_dsp *dsp, int64_t rows, int64_t cols)
{
    Buffer<float> x(rows * cols);
    fill_uniform(x.p, x.n, -8, 8, 3);
    for (auto _ : state) {
        if (attn_softmax_with(dsp, x.p, rows, cols, cols, nullptr) != ATTN_OK)
            state.SkipWithError("attn_softmax failed");
        benchmark::ClobberMemory();
    }
    set_bytes(state, 2.0 * 4.0 * rows * cols);
}

#if BENCH_X86_BASELINE
void bm_softmax_sleef(benchmark::State &state, int64_t rows, int64_t cols)
{
    Buffer<float> x(rows * cols);
    fill_uniform(x.p, x.n, -8, 8, 3);
    for (auto _ : state) {
        bench_softmax_sleef_avx2(x.p, (size_t)rows, (size_t)cols, (size_t)cols);
        benchmark::ClobberMemory();
    }
    set_bytes(state, 2.0 * 4.0 * rows * cols);
}

#endif

void bm_memcpy(benchmark::State &state, int64_t rows, int64_t cols)
{
    Buffer<float> a(rows * cols), b(rows * cols);
    fill_uniform(a.p, a.n, -8, 8, 3);
    for (auto _ : state) {
        std::memcpy(b.p, a.p, a.n * sizeof(float));
        benchmark::DoNotOptimize(b.p);
        benchmark::ClobberMemory();
    }
    set_bytes(state, 2.0 * 4.0 * rows * cols);
}

/* ------------------------------------------------------------ forward */

struct FwdShape {
    int64_t hq, hkv, lq, lk, d;
    bool causal;
};

double fwd_flops(const FwdShape &f)
{
    double pairs = f.causal ? (f.lq == f.lk ? causal_pairs(f.lq) : 0.0) : (double)f.lq * f.lk;
    if (f.causal && f.lq != f.lk) /* bottom-right aligned: row i sees lk - lq + i + 1 keys */
        pairs = (double)f.lq * (f.lk - f.lq) + causal_pairs(f.lq);
    return 4.0 * pairs * f.d * f.hq;
}

/* bfloat16 of x, round to nearest even (x finite here) */
uint16_t to_bf16(float x)
{
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The forward on K/V of kv_dtype (F32, F16, BF16, Q8_0: attn_quantize), q of
   q_dtype (F32 or BF16), in a precision mode (attn.h). */
void bm_forward(benchmark::State &state, const attn_dsp *dsp, FwdShape f, attn_dtype kv_dtype,
                int64_t precision = 0, attn_dtype q_dtype = ATTN_DTYPE_F32)
{
    const size_t nq = f.hq * f.lq * f.d, nkv = f.hkv * f.lk * f.d;
    const bool half = kv_dtype == ATTN_DTYPE_F16 || kv_dtype == ATTN_DTYPE_BF16;
    const bool q8 = kv_dtype == ATTN_DTYPE_Q8_0;
    Buffer<float> q(nq), out(nq), k32(nkv), v32(nkv);
    Buffer<uint16_t> k16(half ? nkv : 0), v16(half ? nkv : 0), q16(q_dtype == ATTN_DTYPE_BF16 ? nq : 0);
    const size_t q8_bytes = q8 ? nkv / ATTN_QBLOCK * ATTN_Q8_0_BYTES : 0; /* src/dtype_list.h */
    Buffer<unsigned char> k8(q8_bytes), v8(q8_bytes);
    fill_uniform(q.p, q.n, -1, 1, 4);
    fill_uniform(k32.p, k32.n, -1, 1, 5);
    fill_uniform(v32.p, v32.n, -1, 1, 6);
    void *kd = k32.p, *vd = v32.p, *qd = q.p;
    int64_t kcols = f.d;
    if (half) {
        for (size_t i = 0; i < nkv; i++) {
            k16.p[i] = kv_dtype == ATTN_DTYPE_F16 ? to_half(k32.p[i]) : to_bf16(k32.p[i]);
            v16.p[i] = kv_dtype == ATTN_DTYPE_F16 ? to_half(v32.p[i]) : to_bf16(v32.p[i]);
        }
        kd = k16.p;
        vd = v16.p;
    } else if (q8) {
        const int64_t rows = (int64_t)(nkv / f.d);
        const int64_t blocks = f.d / ATTN_QBLOCK;
        if (attn_quantize(ATTN_DTYPE_Q8_0, k32.p, rows, f.d, f.d, k8.p, blocks, 0.0f) != ATTN_OK ||
            attn_quantize(ATTN_DTYPE_Q8_0, v32.p, rows, f.d, f.d, v8.p, blocks, 0.0f) != ATTN_OK)
            state.SkipWithError("attn_quantize failed");
        kd = k8.p;
        vd = v8.p;
        kcols = blocks; /* strides count blocks */
    }
    if (q_dtype == ATTN_DTYPE_BF16) {
        for (size_t i = 0; i < nq; i++)
            q16.p[i] = to_bf16(q.p[i]);
        qd = q16.p;
    }
    attn_shape shape = {1, f.hq, f.hkv, f.lq, f.lk, f.d, f.d};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = f.causal ? ATTN_CAUSAL : 0u;
    opt.precision = precision;
    attn_tensor tq = tensor(qd, q_dtype, f.hq, f.lq, f.d);
    attn_tensor tk = tensor(kd, kv_dtype, f.hkv, f.lk, kcols);
    attn_tensor tv = tensor(vd, kv_dtype, f.hkv, f.lk, kcols);
    attn_tensor to = tensor(out.p, ATTN_DTYPE_F32, f.hq, f.lq, f.d);
    for (auto _ : state) {
        if (attn_forward_with(dsp, &shape, &opt, &tq, &tk, &tv, &to, nullptr) != ATTN_OK)
            state.SkipWithError("attn_forward failed");
        benchmark::DoNotOptimize(out.p);
        benchmark::ClobberMemory();
    }
    set_flops(state, fwd_flops(f));
}

#if BENCH_X86_BASELINE
/* ------------------------------------------------------------ FMA peak */

bool have_avx512f() { return __builtin_cpu_supports("avx512f"); }

double seconds_now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/*
 * The FMA peak of `threads` threads running at once, the compute side of
 * decode's roofline, measured as `attn` does (tools/peak.c): every thread
 * of the pool (NULL: the calling thread) runs the widest FMA loop of
 * baseline.h after a barrier, so each takes exactly one task, pinned to
 * its own CPU for the repetition (Linux woke the pool's worker on the
 * caller's CPU and the two loops ran one after the other: one core's peak
 * for 2 threads); a repetition lasts from the first start to the last end;
 * best of ~1 ms repetitions 1 ms apart (on a shared machine longer
 * back-to-back ones are time-sliced), ~40 ms in all. Once per thread count
 * per process; 0 where no AVX2 runs either.
 */
struct PeakJob {
    void (*loop)(long);
    long iters = 0;
    size_t threads = 1;
    std::atomic<size_t> arrived{0};
    std::vector<double> start, end;
};

void peak_task(void *ctx, size_t index)
{
    PeakJob *j = static_cast<PeakJob *>(ctx);
    attn_pin pin;
    if (j->threads > 1)
        attn_pin_to(&pin, index);
    else
        pin.pinned = 0;
    j->arrived.fetch_add(1);
    const double w0 = seconds_now();
    while (j->arrived.load() < j->threads && seconds_now() - w0 < 0.05)
        std::this_thread::yield();
    j->start[index] = seconds_now();
    j->loop(j->iters);
    j->end[index] = seconds_now();
    attn_pin_restore(&pin);
}

double fma_peak_gflops(attn_threadpool *pool, int threads)
{
    static std::map<int, double> cache;
    const auto hit = cache.find(threads);
    if (hit != cache.end())
        return hit->second;
    const bool avx512 = have_avx512f();
    if (!avx512 && !have_avx2())
        return cache[threads] = 0.0;
    PeakJob j;
    j.loop = avx512 ? bench_fma_peak_avx512 : bench_fma_peak_avx2;
    const double flops_per_iter = avx512 ? 512.0 : 192.0;
    j.threads = pool ? (size_t)threads : 1;
    j.start.assign(j.threads, 0.0);
    j.end.assign(j.threads, 0.0);
    /* iterations of ~1 ms: double until one call takes 1 ms, then scale */
    long iters = 1024;
    double sec = 0.0;
    for (;;) {
        const double t0 = seconds_now();
        j.loop(iters);
        sec = seconds_now() - t0;
        if (sec >= 1e-3 || iters >= (1L << 40))
            break;
        iters *= 2;
    }
    j.iters = std::max(1L, (long)((double)iters * 1e-3 / std::max(sec, 1e-9)));
    double best = 0.0;
    const double t0 = seconds_now();
    for (int rep = 0; rep < 64; rep++) {
        if (rep > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        j.arrived.store(0);
        if (j.threads > 1)
            attn_threadpool_parallel_for(pool, peak_task, &j, j.threads);
        else
            peak_task(&j, 0);
        const double first = *std::min_element(j.start.begin(), j.start.end());
        const double last = *std::max_element(j.end.begin(), j.end.end());
        if (last > first)
            best = std::max(best, flops_per_iter * (double)j.iters * (double)j.threads /
                                      (last - first) * 1e-9);
        if (rep + 1 >= 3 && seconds_now() - t0 >= 0.04)
            break;
    }
    return cache[threads] = best;
}
#endif

/*
 * Decode as a real step sees memory: K and V come from DRAM, not from the
 * last-level cache. The benchmark keeps R identical copies of K and V (at
 * least DECODE_ROTATE_BYTES together: 8x a 32 MiB L3) and each iteration
 * reads the next even copy; right after it, with the clock paused, a plain
 * read of the next odd copy's K and V on the same threads is timed by hand:
 * the floor. Counters: kv_bytes (B/s of the decode), floor_GBps, x_floor (the
 * decode's time / the floor's, both timed by hand around each call), flops;
 * on x86-64 also fma_peak_GFLOPs (fma_peak_gflops: the widest FMA on this
 * benchmark's threads, measured in this process before its first iteration)
 * and x_Tstar, the decode's mean time / the roofline T* = max(the floor's
 * mean time, FLOPs / the peak). threads: 1 (no pool) or a pool.
 */
#define DECODE_ROTATE_BYTES (256.0 * 1024 * 1024)

struct ReadJob {
    const unsigned char *base[2];
    size_t bytes[2], chunk, chunks0;
    std::vector<uint64_t> sums;
};

uint64_t read_words(const unsigned char *p, size_t n)
{
    uint64_t acc[8] = {0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8];
        std::memcpy(w, p + i, sizeof w);
        for (int l = 0; l < 8; l++)
            acc[l] += w[l];
    }
    uint64_t s = 0;
    for (int l = 0; l < 8; l++)
        s += acc[l];
    for (; i < n; i++)
        s += p[i];
    return s;
}

void read_task(void *ctx, size_t index)
{
    ReadJob *j = static_cast<ReadJob *>(ctx);
    const int t = index < j->chunks0 ? 0 : 1;
    const size_t at = (t ? index - j->chunks0 : index) * j->chunk;
    const size_t n = at < j->bytes[t] ? std::min(j->chunk, j->bytes[t] - at) : 0;
    j->sums[index] = read_words(j->base[t] + at, n);
}

void bm_decode(benchmark::State &state, const attn_dsp *dsp, FwdShape f, attn_dtype kv_dtype,
               int threads)
{
    const size_t esize = kv_dtype == ATTN_DTYPE_F32 ? 4 : 2;
    const size_t nq = f.hq * f.lq * f.d, nkv = f.hkv * f.lk * f.d;
    const size_t copy_bytes = (nkv * esize + 63) / 64 * 64;
    size_t copies = (size_t)std::ceil(DECODE_ROTATE_BYTES / (2.0 * (double)copy_bytes));
    copies = std::max<size_t>(4, copies + (copies & 1));
    Buffer<float> q(nq), out(nq), k32(nkv), v32(nkv);
    Buffer<unsigned char> k(copies * copy_bytes), v(copies * copy_bytes);
    fill_uniform(q.p, q.n, -1, 1, 4);
    fill_uniform(k32.p, k32.n, -1, 1, 5);
    fill_uniform(v32.p, v32.n, -1, 1, 6);
    for (size_t c = 0; c < copies; c++)
        for (size_t i = 0; i < nkv; i++) {
            unsigned char *kd = k.p + c * copy_bytes + i * esize, *vd = v.p + c * copy_bytes + i * esize;
            if (kv_dtype == ATTN_DTYPE_F16) {
                const uint16_t kh = to_half(k32.p[i]), vh = to_half(v32.p[i]);
                std::memcpy(kd, &kh, 2);
                std::memcpy(vd, &vh, 2);
            } else {
                std::memcpy(kd, &k32.p[i], 4);
                std::memcpy(vd, &v32.p[i], 4);
            }
        }
    attn_threadpool *pool = nullptr;
    if (threads > 1 && attn_threadpool_create(threads, &pool) != ATTN_OK) {
        state.SkipWithError("attn_threadpool_create failed");
        return;
    }
    attn_shape shape = {1, f.hq, f.hkv, f.lq, f.lk, f.d, f.d};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = f.causal ? ATTN_CAUSAL : 0u;
    if (pool) {
        opt.parallel_for = attn_threadpool_parallel_for;
        opt.parallel_ctx = pool;
    }
    attn_tensor tq = tensor(q.p, ATTN_DTYPE_F32, f.hq, f.lq, f.d);
    attn_tensor to = tensor(out.p, ATTN_DTYPE_F32, f.hq, f.lq, f.d);
    ReadJob job;
    job.bytes[0] = job.bytes[1] = nkv * esize;
    job.chunk = (job.bytes[0] / (size_t)(4 * threads) + 63) / 64 * 64;
    job.chunks0 = (job.bytes[0] + job.chunk - 1) / job.chunk;
    job.sums.assign(2 * job.chunks0, 0);
#if BENCH_X86_BASELINE
    const double peak = fma_peak_gflops(pool, threads); /* on the threads the decode uses */
#else
    const double peak = 0.0;
#endif
    double floor_s = 0.0, decode_s = 0.0;
    size_t it = 0;
    for (auto _ : state) {
        const size_t c = (2 * it) % copies;
        attn_tensor tk = tensor(k.p + c * copy_bytes, kv_dtype, f.hkv, f.lk, f.d);
        attn_tensor tv = tensor(v.p + c * copy_bytes, kv_dtype, f.hkv, f.lk, f.d);
        const auto d0 = std::chrono::steady_clock::now();
        if (attn_forward_with(dsp, &shape, &opt, &tq, &tk, &tv, &to, nullptr) != ATTN_OK)
            state.SkipWithError("attn_forward failed");
        decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - d0).count();
        benchmark::DoNotOptimize(out.p);
        benchmark::ClobberMemory();
        state.PauseTiming();
        job.base[0] = k.p + (c + 1) * copy_bytes;
        job.base[1] = v.p + (c + 1) * copy_bytes;
        const auto t0 = std::chrono::steady_clock::now();
        if (pool)
            attn_threadpool_parallel_for(pool, read_task, &job, job.sums.size());
        else
            for (size_t i = 0; i < job.sums.size(); i++)
                read_task(&job, i);
        floor_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        uint64_t sum = 0;
        for (uint64_t x : job.sums)
            sum += x;
        benchmark::DoNotOptimize(sum);
        it++;
        state.ResumeTiming();
    }
    attn_threadpool_destroy(pool);
    const double bytes = 2.0 * (double)(nkv * esize), n = (double)state.iterations();
    set_flops(state, fwd_flops(f));
    state.counters["kv_bytes"] = benchmark::Counter(bytes * n, benchmark::Counter::kIsRate);
    state.counters["floor_GBps"] = floor_s > 0 ? bytes * n / floor_s * 1e-9 : 0.0;
    state.counters["x_floor"] = floor_s > 0 ? decode_s / floor_s : 0.0;
    if (peak > 0.0 && floor_s > 0.0 && n > 0.0) {
        const double t_star = std::max(floor_s / n, fwd_flops(f) / (peak * 1e9));
        state.counters["fma_peak_GFLOPs"] = peak;
        state.counters["x_Tstar"] = decode_s / n / t_star;
    }
}

#if BENCH_COMPOSITION
/*
 * The composition: per query head S = scale Q K^T (sgemm), the causal
 * triangle set to -inf, a SLEEF softmax per row, O = P V (sgemm).
 */
void bm_forward_composition(benchmark::State &state, FwdShape f)
{
    const size_t nq = f.hq * f.lq * f.d, nkv = f.hkv * f.lk * f.d;
    Buffer<float> q(nq), out(nq), k(nkv), v(nkv), s(f.lq * f.lk);
    fill_uniform(q.p, q.n, -1, 1, 4);
    fill_uniform(k.p, k.n, -1, 1, 5);
    fill_uniform(v.p, v.n, -1, 1, 6);
    const float scale = 1.0f / std::sqrt((float)f.d);
    const int64_t group = f.hq / f.hkv, off = f.lk - f.lq;
    const int lq = (int)f.lq, lk = (int)f.lk, d = (int)f.d;
    for (auto _ : state) {
        for (int64_t h = 0; h < f.hq; h++) {
            const float *qh = q.p + h * f.lq * f.d;
            const float *kh = k.p + (h / group) * f.lk * f.d;
            const float *vh = v.p + (h / group) * f.lk * f.d;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, lq, lk, d, scale, qh, d, kh, d,
                        0.0f, s.p, lk);
            if (f.causal)
                for (int64_t i = 0; i < f.lq; i++)
                    for (int64_t j = i + off + 1; j < f.lk; j++)
                        s.p[i * f.lk + j] = -INFINITY;
            bench_softmax_sleef_avx2(s.p, (size_t)lq, (size_t)lk, (size_t)lk);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, lq, d, lk, 1.0f, s.p, lk, vh, d,
                        0.0f, out.p + h * f.lq * f.d, d);
        }
        benchmark::DoNotOptimize(out.p);
        benchmark::ClobberMemory();
    }
    set_flops(state, fwd_flops(f));
}

/* Decode as a C user writes it: per query head, two sgemv and a softmax. */
void bm_decode_gemv(benchmark::State &state, FwdShape f)
{
    /* K and V rotated over copies like bm_decode's, so the baseline reads
       DRAM as the decode it is compared with does */
    const size_t nq = f.hq * f.d, nkv = f.hkv * f.lk * f.d;
    size_t copies = (size_t)std::ceil(DECODE_ROTATE_BYTES / (2.0 * 4.0 * (double)nkv));
    copies = std::max<size_t>(4, copies);
    Buffer<float> q(nq), out(nq), k(copies * nkv), v(copies * nkv), s(f.lk);
    fill_uniform(q.p, q.n, -1, 1, 4);
    fill_uniform(k.p, nkv, -1, 1, 5);
    fill_uniform(v.p, nkv, -1, 1, 6);
    for (size_t c = 1; c < copies; c++) {
        std::memcpy(k.p + c * nkv, k.p, nkv * sizeof(float));
        std::memcpy(v.p + c * nkv, v.p, nkv * sizeof(float));
    }
    const float scale = 1.0f / std::sqrt((float)f.d);
    const int64_t group = f.hq / f.hkv;
    const int lk = (int)f.lk, d = (int)f.d;
    size_t it = 0;
    for (auto _ : state) {
        const float *kc = k.p + (it % copies) * nkv, *vc = v.p + (it % copies) * nkv;
        it++;
        for (int64_t h = 0; h < f.hq; h++) {
            const float *kh = kc + (h / group) * f.lk * f.d;
            const float *vh = vc + (h / group) * f.lk * f.d;
            cblas_sgemv(CblasRowMajor, CblasNoTrans, lk, d, scale, kh, d, q.p + h * f.d, 1, 0.0f,
                        s.p, 1);
            bench_softmax_sleef_avx2(s.p, 1, (size_t)lk, (size_t)lk);
            cblas_sgemv(CblasRowMajor, CblasTrans, lk, d, 1.0f, vh, d, s.p, 1, 0.0f,
                        out.p + h * f.d, 1);
        }
        benchmark::DoNotOptimize(out.p);
        benchmark::ClobberMemory();
    }
    set_flops(state, fwd_flops(f));
}
#endif

#if BENCH_X86_BASELINE
/* The floor of decode: reading K and V (f32) once. */
void bm_kv_read(benchmark::State &state, FwdShape f)
{
    const size_t nkv = f.hkv * f.lk * f.d;
    Buffer<float> k(nkv), v(nkv);
    fill_uniform(k.p, k.n, -1, 1, 5);
    fill_uniform(v.p, v.n, -1, 1, 6);
    for (auto _ : state) {
        float sum = bench_read_sum_avx2(k.p, nkv) + bench_read_sum_avx2(v.p, nkv);
        benchmark::DoNotOptimize(sum);
    }
    set_bytes(state, 2.0 * 4.0 * nkv);
}

/* One peak loop of bench/peak.c: `rounds` rounds of `flops` operations
   each. FMA: 12 ymm (192) or 16 zmm chains (512); vdpbf16ps 16 x 16 lanes x 4
   (1024), vpdpbusd x 8 (2048); 4 AMX tiles of 16 x 16 lanes x 64 (65536,
   tdpbf16ps) or x 128 (131072, tdpbssd). */
void bm_peak(benchmark::State &state, void (*loop)(long), long rounds, double flops)
{
    for (auto _ : state)
        loop(rounds);
    set_flops(state, flops * rounds);
}
#endif

/* ------------------------------------------------------------ kernels */

/*
 * Every kernel of every table, on its own and on data in cache, is timed by
 * tests/kernels/checkasm.c (`checkasm --bench`, which walks the kernel list). Here
 * only exp_sum, beside the SLEEF loop a C user would write instead.
 */
/*
 * exp_sum over the rows of a 512 x 512 table (in L2), as softmax calls it.
 * max = 1 keeps x - max <= 0 on every pass (the results, in (0, 1], are the
 * next pass's inputs), the range softmax gives it.
 */
void bm_kernel_exp_sum(benchmark::State &state, const attn_dsp *dsp)
{
    const int64_t n = 512;
    Buffer<float> x(n * n);
    fill_uniform(x.p, x.n, -8, 1, 11);
    for (auto _ : state) {
        float total = 0.0f;
        for (int64_t r = 0; r < n; r++)
            total += dsp->exp_sum(x.p + r * n, (size_t)n, 1.0f, nullptr);
        benchmark::DoNotOptimize(total);
    }
    set_bytes(state, 2.0 * 4.0 * n * n);
}

#if BENCH_X86_BASELINE
void bm_kernel_exp_sum_sleef(benchmark::State &state)
{
    const int64_t n = 512;
    Buffer<float> x(n * n);
    fill_uniform(x.p, x.n, -8, 1, 11);
    for (auto _ : state) {
        float total = 0.0f;
        for (int64_t r = 0; r < n; r++)
            total += bench_exp_sum_sleef_avx2(x.p + r * n, (size_t)n, 1.0f);
        benchmark::DoNotOptimize(total);
    }
    set_bytes(state, 2.0 * 4.0 * n * n);
}
#endif

/* ------------------------------------------------------------ registration */

struct Isa {
    attn_isa isa;
    const char *name;
};
/* Every ISA of the registry (src/isa_list.h); those this build or CPU lacks
   have no table and register nothing. */
const Isa kIsas[] = {
#define BENCH_ISA(ID, nm, cpu, init, base, have) {ATTN_ISA_##ID, #nm},
    ATTN_ISA_LIST(BENCH_ISA)
#undef BENCH_ISA
};

std::string fwd_name(const char *op, const FwdShape &f, const char *dtype)
{
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s/Hq%lld_Hkv%lld_Lq%lld_Lk%lld_d%lld%s_%s", op,
                  (long long)f.hq, (long long)f.hkv, (long long)f.lq, (long long)f.lk,
                  (long long)f.d, f.causal ? "_causal" : "", dtype);
    return buf;
}

void register_all()
{
    const bool avx2 = BENCH_X86_BASELINE && have_avx2();
    using benchmark::kMillisecond;

#if BENCH_X86_BASELINE
    if (avx2)
        benchmark::RegisterBenchmark("ref/fma_peak_avx2_1thread", bm_peak, bench_fma_peak_avx2,
                                     1000000L, 192.0);
    if (have_avx512f())
        benchmark::RegisterBenchmark("ref/fma_peak_avx512_1thread", bm_peak,
                                     bench_fma_peak_avx512, 1000000L, 512.0);
    if (__builtin_cpu_supports("avx512bf16"))
        benchmark::RegisterBenchmark("ref/bf16dot_peak_avx512_1thread", bm_peak,
                                     bench_bf16dot_peak_avx512, 1000000L, 1024.0);
    if (__builtin_cpu_supports("avx512vnni"))
        benchmark::RegisterBenchmark("ref/int8dot_peak_avx512_1thread", bm_peak,
                                     bench_int8dot_peak_avx512, 1000000L, 2048.0);
    if (attn_isa_available(ATTN_ISA_AMX)) {
        benchmark::RegisterBenchmark("ref/bf16tile_peak_amx_1thread", bm_peak,
                                     bench_bf16tile_peak_amx, 100000L, 65536.0);
        benchmark::RegisterBenchmark("ref/int8tile_peak_amx_1thread", bm_peak,
                                     bench_int8tile_peak_amx, 100000L, 131072.0);
    }
#endif

    for (const Isa &i : kIsas) {
        const attn_dsp *dsp = attn_dsp_for_isa(i.isa);
        if (!dsp || i.isa == ATTN_ISA_SCALAR)
            continue;
        const std::string isa = i.name;
        benchmark::RegisterBenchmark(("kernel/exp_sum/512x512/" + isa).c_str(), bm_kernel_exp_sum,
                                     dsp);
    }
#if BENCH_X86_BASELINE
    if (avx2)
        benchmark::RegisterBenchmark("kernel/exp_sum/512x512/baseline_sleef_expf8_u10avx2",
                                     bm_kernel_exp_sum_sleef);
#endif

    for (int64_t d : {64, 128}) {
        const int64_t L = 2048;
        std::string base = "scores/L" + std::to_string(L) + "_d" + std::to_string(d);
        for (const Isa &i : kIsas)
            if (const attn_dsp *dsp = attn_dsp_for_isa(i.isa))
                benchmark::RegisterBenchmark((base + "/" + i.name).c_str(), bm_scores, dsp, L, d)
                    ->Unit(kMillisecond);
#if BENCH_HAVE_OPENBLAS
        benchmark::RegisterBenchmark((base + "/baseline_sgemm").c_str(), bm_scores_sgemm, L, d)
            ->Unit(kMillisecond);
#endif
    }

    for (int64_t n : {512, 2048, 4096}) {
        std::string base = "softmax/" + std::to_string(n) + "x" + std::to_string(n);
        for (const Isa &i : kIsas)
            if (const attn_dsp *dsp = attn_dsp_for_isa(i.isa))
                benchmark::RegisterBenchmark((base + "/" + i.name).c_str(), bm_softmax, dsp, n, n)
                    ->Unit(kMillisecond);
#if BENCH_X86_BASELINE
        if (avx2)
            benchmark::RegisterBenchmark((base + "/baseline_sleef_loop").c_str(), bm_softmax_sleef,
                                         n, n)
                ->Unit(kMillisecond);
#endif
        if (n == 4096)
            benchmark::RegisterBenchmark((base + "/ref_memcpy").c_str(), bm_memcpy, n, n)
                ->Unit(kMillisecond);
    }

    /* Prefill: MHA causal and not, GQA causal; F16 K/V for the causal MHA. */
    const FwdShape prefill[] = {{8, 8, 2048, 2048, 128, true},
                                {8, 8, 2048, 2048, 128, false},
                                {32, 8, 2048, 2048, 128, true}};
    for (const FwdShape &f : prefill) {
        for (const Isa &i : kIsas) {
            const attn_dsp *dsp = attn_dsp_for_isa(i.isa);
            if (!dsp)
                continue;
            FwdShape g = f;
            if (i.isa == ATTN_ISA_SCALAR)
                g.lq = g.lk = 512; /* the scalar table at L=2048 takes tens of seconds */
            auto *b = benchmark::RegisterBenchmark((fwd_name("forward", g, "f32") + "/" + i.name).c_str(),
                                                   bm_forward, dsp, g, ATTN_DTYPE_F32, 0, ATTN_DTYPE_F32)
                          ->Unit(kMillisecond);
            if (i.isa == ATTN_ISA_SCALAR)
                b->Iterations(1);
            if (f.causal && f.hq == f.hkv && i.isa != ATTN_ISA_SCALAR)
                benchmark::RegisterBenchmark((fwd_name("forward", g, "f16kv") + "/" + i.name).c_str(),
                                             bm_forward, dsp, g, ATTN_DTYPE_F16, 0, ATTN_DTYPE_F32)
                    ->Unit(kMillisecond);
            /* the precision modes (attn.h) on the MHA shapes: bf16 q/k/v in
               the default and bf16 modes, f32 in the bf16 mode; Q8_0 K/V in
               the default and int8 modes (causal) */
            if (f.hq == f.hkv && i.isa != ATTN_ISA_SCALAR) {
                const struct {
                    const char *name;
                    attn_dtype kv, q;
                    int64_t precision;
                    bool causal_only;
                } modes[] = {{"bf16qkv", ATTN_DTYPE_BF16, ATTN_DTYPE_BF16, 0, true},
                             {"bf16qkv_bf16mode", ATTN_DTYPE_BF16, ATTN_DTYPE_BF16, 1, false},
                             {"f32_bf16mode", ATTN_DTYPE_F32, ATTN_DTYPE_F32, 1, true},
                             {"q8_0kv", ATTN_DTYPE_Q8_0, ATTN_DTYPE_F32, 0, true},
                             {"q8_0kv_int8mode", ATTN_DTYPE_Q8_0, ATTN_DTYPE_F32, 2, true}};
                for (const auto &m : modes)
                    if (f.causal || !m.causal_only)
                        benchmark::RegisterBenchmark(
                            (fwd_name("forward", g, m.name) + "/" + i.name).c_str(), bm_forward,
                            dsp, g, m.kv, m.precision, m.q)
                            ->Unit(kMillisecond);
            }
        }
#if BENCH_COMPOSITION
        if (avx2)
            benchmark::RegisterBenchmark((fwd_name("forward", f, "f32") + "/baseline_composition").c_str(),
                                         bm_forward_composition, f)
                ->Unit(kMillisecond);
#endif
    }

    /* Decode (Lq 1) and speculative decoding (Lq 4): K/V rotated out of the LLC. */
    const FwdShape decodes[] = {{32, 8, 1, 4096, 128, false}, {32, 8, 4, 4096, 128, false}};
    for (const FwdShape &decode : decodes)
        for (const Isa &i : kIsas)
            if (const attn_dsp *dsp = attn_dsp_for_isa(i.isa)) {
                if (i.isa == ATTN_ISA_SCALAR && decode.lq > 1)
                    continue;
                for (int threads : {1, 2}) {
                    const std::string t = threads == 1 ? "" : "_2threads";
                    benchmark::RegisterBenchmark(
                        (fwd_name("decode", decode, "f32") + "/" + i.name + t).c_str(), bm_decode,
                        dsp, decode, ATTN_DTYPE_F32, threads)
                        ->Unit(benchmark::kMicrosecond)
                        ->UseRealTime();
                    if (i.isa != ATTN_ISA_SCALAR && threads == 1 && decode.lq == 1)
                        benchmark::RegisterBenchmark(
                            (fwd_name("decode", decode, "f16kv") + "/" + i.name + t).c_str(),
                            bm_decode, dsp, decode, ATTN_DTYPE_F16, threads)
                            ->Unit(benchmark::kMicrosecond)
                            ->UseRealTime();
                }
            }
    const FwdShape decode = decodes[0];
#if BENCH_COMPOSITION
    if (avx2)
        benchmark::RegisterBenchmark((fwd_name("decode", decode, "f32") + "/baseline_gemv").c_str(),
                                     bm_decode_gemv, decode)
            ->Unit(benchmark::kMicrosecond);
#endif
#if BENCH_X86_BASELINE
    if (avx2)
        benchmark::RegisterBenchmark((fwd_name("decode", decode, "f32") + "/ref_kv_read").c_str(),
                                     bm_kv_read, decode)
            ->Unit(benchmark::kMicrosecond);
#endif
}

} // namespace

int main(int argc, char **argv)
{
#if BENCH_HAVE_OPENBLAS
    openblas_set_num_threads(1); /* every figure is single-threaded */
#endif
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    std::string isas;
    for (const Isa &i : kIsas)
        if (attn_dsp_for_isa(i.isa))
            isas += std::string(isas.empty() ? "" : ",") + i.name;
    benchmark::AddCustomContext("libattn", attn_version_string());
    benchmark::AddCustomContext("attn_isas", isas);
    benchmark::AddCustomContext("attn_isa_active", attn_isa_name(attn_isa_active()));
    benchmark::AddCustomContext("threads", "1");
#if BENCH_HAVE_OPENBLAS
    benchmark::AddCustomContext("openblas", openblas_get_config());
#endif
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
