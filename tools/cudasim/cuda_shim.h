// cudasim: CUDA C kernels compiled by g++ and run on CPU threads (a test double for CuPy).
//
// This header goes before a module's CUDA C source. It maps the CUDA language extensions
// to C++20 and provides the built-in variables, intrinsics and math functions that kernels
// use. cudasim's Python side appends one launcher per `extern "C" __global__` kernel, which
// calls `cudasim::run`: the grid's blocks run one after another, each block's threads as
// OS threads or as fibers (see "the scheduler" below). Within a block, `__syncthreads()`
// and warp operations are real barriers and exchanges between the threads.
//
// `__shared__` is `static`: one block runs at a time, so a function-static array is exactly
// the running block's shared memory (left as the previous block wrote it, like CUDA's
// uninitialised shared memory).
#pragma once
#ifndef CUDASIM_SHIM_H
#define CUDASIM_SHIM_H

#include <math.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cassert>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#if !defined(__x86_64__) && !defined(CUDASIM_UCONTEXT)
#define CUDASIM_UCONTEXT 1  // portable fiber switching (slower: a syscall per switch)
#endif
#ifdef CUDASIM_UCONTEXT
#include <ucontext.h>
#endif

// ---------------------------------------------------------------- language extensions

#define __CUDASIM__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static
#define __managed__
#define __align__(n) alignas(n)
#define __restrict__ __restrict
#define __grid_constant__

// ---------------------------------------------------------------- built-in variables

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
};
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static dim3 blockDim;  // per launch (launches are serialised)
static dim3 gridDim;
static constexpr int warpSize = 32;

// ---------------------------------------------------------------- vector types

struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(16) double2 { double x, y; };
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(8) uint2 { unsigned int x, y; };
struct __align__(16) uint4 { unsigned int x, y, z, w; };
struct __align__(16) longlong2 { long long x, y; };
static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 layout");
static_assert(sizeof(double2) == 16 && alignof(double2) == 16, "double2 layout");

__device__ __forceinline__ float2 make_float2(float x, float y) { return {x, y}; }
__device__ __forceinline__ float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
__device__ __forceinline__ double2 make_double2(double x, double y) { return {x, y}; }
__device__ __forceinline__ int2 make_int2(int x, int y) { return {x, y}; }
__device__ __forceinline__ int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
__device__ __forceinline__ uint3 make_uint3(unsigned x, unsigned y, unsigned z) {
  return {x, y, z};
}

// ---------------------------------------------------------------- reinterpretation, loads

__device__ __forceinline__ float __int_as_float(int x) { return std::bit_cast<float>(x); }
__device__ __forceinline__ int __float_as_int(float x) { return std::bit_cast<int>(x); }
__device__ __forceinline__ float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
__device__ __forceinline__ unsigned __float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
__device__ __forceinline__ double __longlong_as_double(long long x) {
  return std::bit_cast<double>(x);
}
__device__ __forceinline__ long long __double_as_longlong(double x) {
  return std::bit_cast<long long>(x);
}
template <typename T> __device__ __forceinline__ T __ldg(const T* p) { return *p; }

// ---------------------------------------------------------------- math beyond glibc
// CUDA's math library overloads the C functions for float (exp(float) is expf), as C++'s
// <cmath> does; these are the device functions glibc lacks. The __ intrinsics are CUDA's
// fast approximate versions; here they are the accurate ones.

__device__ __forceinline__ float rsqrtf(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double rsqrt(double x) { return 1.0 / sqrt(x); }
__device__ __forceinline__ float rcbrtf(float x) { return 1.0f / cbrtf(x); }
__device__ __forceinline__ double rcbrt(double x) { return 1.0 / cbrt(x); }
__device__ __forceinline__ float __expf(float x) { return expf(x); }
__device__ __forceinline__ float __exp10f(float x) { return exp10f(x); }
__device__ __forceinline__ float __logf(float x) { return logf(x); }
__device__ __forceinline__ float __log2f(float x) { return log2f(x); }
__device__ __forceinline__ float __log10f(float x) { return log10f(x); }
__device__ __forceinline__ float __sinf(float x) { return sinf(x); }
__device__ __forceinline__ float __cosf(float x) { return cosf(x); }
__device__ __forceinline__ float __tanf(float x) { return tanf(x); }
__device__ __forceinline__ float __powf(float x, float y) { return powf(x, y); }
__device__ __forceinline__ float __fdividef(float x, float y) { return x / y; }
__device__ __forceinline__ float fdividef(float x, float y) { return x / y; }
__device__ __forceinline__ float __saturatef(float x) {
  return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x));
}
__device__ __forceinline__ float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678f); }
__device__ __forceinline__ double normcdf(double x) {
  return 0.5 * erfc(-x * 0.70710678118654752);
}
__device__ __forceinline__ float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double __fma_rn(double a, double b, double c) {
  return fma(a, b, c);
}
// CUDA's min and max of two numbers (global functions in device code)
#define CUDASIM_MINMAX(T)                                                             \
  __device__ __forceinline__ T min(T a, T b) { return a < b ? a : b; }                \
  __device__ __forceinline__ T max(T a, T b) { return a > b ? a : b; }
CUDASIM_MINMAX(int)
CUDASIM_MINMAX(unsigned int)
CUDASIM_MINMAX(long long)
CUDASIM_MINMAX(unsigned long long)
#undef CUDASIM_MINMAX
__device__ __forceinline__ float min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double min(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ double max(double a, double b) { return fmax(a, b); }

// ---------------------------------------------------------------- the scheduler
//
// Two ways to run a block's threads (chosen per launch):
// - OS threads: `blockDim.x` pthreads, created per launch, each running the kernel once
//   per block with a barrier between blocks; waits sleep on futexes. Truly concurrent, but
//   every wait costs a context switch (microseconds: about 10 s for 1024 blocks of a
//   block-wide reduction on 2 cores).
// - fibers: the block's threads are user-level contexts on the launching OS thread; a wait
//   switches to the next thread. Deterministic (a thread runs until it waits or returns)
//   and about 100 times faster.
// Both detect what would hang or be undefined on a GPU and fail the launch instead:
// a deadlock (every live thread waits, at barriers the others do not reach) and a
// divergent warp operation (lanes of a warp at shuffles or votes of different call sites,
// e.g. a shuffle skipped by some lanes: every lane named in the mask must execute it).

namespace cudasim {
namespace {

enum Error : int { kOk = 0, kDeadlock = -2, kDivergent = -3 };

// One CUDA thread's own state (besides threadIdx): its warp-operation count in the current
// block (for double buffering), and for fibers its saved context.
class Barrier;
struct Thread {
  unsigned tid = 0;
  unsigned round = 0;
  std::atomic<bool> done{false};
  std::atomic<const Barrier*> waiting{nullptr};  // the barrier it sleeps at, for diagnostics
  void* sp = nullptr;
#ifdef CUDASIM_UCONTEXT
  ucontext_t ctx;
#endif
};

thread_local Thread* t_self = nullptr;

bool g_fibers = false;                     // the running launch's mode
std::atomic<int> g_error{kOk};             // the first error of the running launch
std::atomic<bool> g_broken{false};         // threads: after an error, barriers no longer wait
std::atomic<unsigned long> g_progress{0};  // barrier arrivals and thread exits
std::atomic<int> g_waiting{0};             // threads: threads asleep in a barrier
std::atomic<int> g_running{0};             // threads: pool threads not yet returned
int g_deadlock_ms = 2000;                  // threads: no progress this long while all sleep
unsigned g_block_now = 0;                  // the block running
char g_message[512];

void fiber_yield();
[[noreturn]] void fiber_fail();

inline void futex_wait(std::atomic<unsigned>* addr, unsigned value) {
  syscall(SYS_futex, reinterpret_cast<unsigned*>(addr), FUTEX_WAIT_PRIVATE, value, nullptr,
          nullptr, 0);
}
inline void futex_wait_ms(std::atomic<int>* addr, int value, long ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000};
  syscall(SYS_futex, reinterpret_cast<int*>(addr), FUTEX_WAIT_PRIVATE, value, &t, nullptr, 0);
}
inline void futex_wake_all(std::atomic<int>* addr) {
  syscall(SYS_futex, reinterpret_cast<int*>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}
inline void futex_wake_all(std::atomic<unsigned>* addr) {
  syscall(SYS_futex, reinterpret_cast<unsigned*>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

// A reusable barrier for `expected` threads; a thread that finishes the kernel drops out
// (as an exited thread stops counting for bar.sync), so the others do not wait for it.
class Barrier {
 public:
  void reset(int expected) {
    expected_ = expected;
    arrived_ = 0;
  }
  template <typename F> void wait(F&& on_release) {
    g_progress.fetch_add(1, std::memory_order_relaxed);
    if (g_fibers) {
      const unsigned gen = gen_.load(std::memory_order_relaxed);
      if (++arrived_ >= expected_) {
        on_release();
        arrived_ = 0;
        gen_.store(gen + 1, std::memory_order_relaxed);
        return;
      }
      t_self->waiting = this;
      while (gen_.load(std::memory_order_relaxed) == gen) fiber_yield();
      t_self->waiting = nullptr;
      return;
    }
    if (g_broken.load(std::memory_order_acquire)) return;
    std::unique_lock<std::mutex> lock(mutex_);
    const unsigned gen = gen_.load(std::memory_order_relaxed);
    if (++arrived_ >= expected_) {
      on_release();
      release(lock, gen);
      return;
    }
    lock.unlock();
    if (t_self) t_self->waiting = this;
    g_waiting.fetch_add(1);
    while (gen_.load(std::memory_order_acquire) == gen &&
           !g_broken.load(std::memory_order_acquire))
      futex_wait(&gen_, gen);
    g_waiting.fetch_sub(1);
    if (t_self) t_self->waiting = nullptr;
  }
  void wait() {
    wait([] {});
  }
  void drop() {
    if (g_fibers) {
      --expected_;
      if (arrived_ > 0 && arrived_ >= expected_) {
        arrived_ = 0;
        gen_.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    --expected_;
    if (arrived_ > 0 && arrived_ >= expected_) release(lock, gen_.load(std::memory_order_relaxed));
  }
  // threads: after g_broken is set, wake everyone (they see g_broken and go on)
  void wake_all() {
    gen_.fetch_add(1, std::memory_order_release);
    futex_wake_all(&gen_);
  }

 private:
  void release(std::unique_lock<std::mutex>& lock, unsigned gen) {
    arrived_ = 0;
    gen_.store(gen + 1, std::memory_order_release);
    lock.unlock();
    futex_wake_all(&gen_);
  }
  std::mutex mutex_;
  int expected_ = 0, arrived_ = 0;
  std::atomic<unsigned> gen_{0};
};

struct Warp {
  Barrier barrier;
  std::atomic<unsigned> alive{0};  // lanes that have not returned from the kernel
  unsigned long long slot[2][32];  // published values, double-buffered
  unsigned long long sig[2][32];   // what each lane is doing: see signature()
  unsigned mask[2][32];
};

struct Launch {
  unsigned grid = 0, block = 0;
  void (*body)(void* const*) = nullptr;
  void* const* args = nullptr;
  Barrier block_barrier;  // __syncthreads
  Barrier boundary;       // threads: between blocks (no thread drops out of this one)
  Warp warps[32];
  Thread threads[1024];
};

Launch g_launch;

// Record the launch's first error; fibers abandon the launch at once, OS threads stop
// waiting at barriers so that every thread runs to its end.
void fail(Error e, const char* what) {
  int ok = kOk;
  if (g_error.compare_exchange_strong(ok, e))
    snprintf(g_message, sizeof g_message, "%s (block %u)", what, g_block_now);
  if (g_fibers) fiber_fail();
  g_broken.store(true, std::memory_order_release);
  Launch& L = g_launch;
  L.block_barrier.wake_all();
  L.boundary.wake_all();
  for (Warp& w : L.warps) w.barrier.wake_all();
}

// What the threads of a deadlocked block wait at: a warp whose live lanes wait at
// different barriers (a warp operation some skipped) is named.
void deadlock() {
  Launch& L = g_launch;
  for (unsigned w = 0; w * 32 < L.block; ++w) {
    const Barrier* first = nullptr;
    for (unsigned t = w * 32; t < w * 32 + 32 && t < L.block; ++t) {
      const Barrier* at = L.threads[t].waiting.load();
      if (L.threads[t].done || at == nullptr) continue;
      if (first != nullptr && at != first) {
        char what[200];
        snprintf(what, sizeof what, "deadlock: lanes of warp %u wait at different barriers "
                 "(thread %u at %s), as when a shuffle is skipped by some lanes", w, t,
                 at == &L.block_barrier ? "__syncthreads" : "a warp operation");
        fail(kDeadlock, what);
      }
      first = at;
    }
  }
  fail(kDeadlock, "deadlock: every live thread waits at a barrier that the others do not "
                  "reach");
}

void reset_block(Launch& L) {
  L.block_barrier.reset((int)L.block);
  for (unsigned w = 0; w * 32 < L.block; ++w) {
    const unsigned lanes = L.block - w * 32 < 32 ? L.block - w * 32 : 32;
    L.warps[w].barrier.reset((int)lanes);
    L.warps[w].alive.store(lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u);
  }
  for (unsigned t = 0; t < L.block; ++t) {
    L.threads[t].round = 0;
    L.threads[t].done = false;
    L.threads[t].waiting = nullptr;
  }
}

// The thread has returned from the kernel: it stops counting for its barriers.
void exit_thread(Launch& L, unsigned tid) {
  g_progress.fetch_add(1, std::memory_order_relaxed);
  Warp& warp = L.warps[tid / 32];
  warp.alive.fetch_and(~(1u << (tid % 32)));
  warp.barrier.drop();
  L.block_barrier.drop();
  L.threads[tid].done = true;
}

// ------------------------------------------------ OS threads

void* os_thread_main(void* p) {
  Launch& L = g_launch;
  const unsigned tid = (unsigned)(uintptr_t)p;
  threadIdx = {tid, 0, 0};
  t_self = &L.threads[tid];
  for (unsigned b = 0; b < L.grid && !g_broken.load(); ++b) {
    blockIdx = {b, 0, 0};
    if (tid == 0) g_block_now = b;
    L.body(L.args);
    exit_thread(L, tid);
    L.boundary.wait([&] { reset_block(L); });
  }
  if (g_running.fetch_sub(1) == 1) futex_wake_all(&g_running);
  return nullptr;
}

int run_os_threads(Launch& L) {
  L.boundary.reset((int)L.block);
  g_broken = false;
  g_waiting = 0;
  g_running = (int)L.block;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  static pthread_t threads[1024];
  unsigned started = 0;
  int err = 0;
  for (; started < L.block; ++started) {
    err = pthread_create(&threads[started], &attr, os_thread_main, (void*)(uintptr_t)started);
    if (err != 0) break;
  }
  pthread_attr_destroy(&attr);
  if (err != 0) {  // the threads started wait at a barrier for the others: no way back
    fprintf(stderr, "cudasim: pthread_create failed (%d) after %u threads\n", err, started);
    abort();
  }
  // watchdog: every running thread asleep at a barrier, and no progress for a while
  using Clock = std::chrono::steady_clock;
  unsigned long seen = g_progress.load();
  Clock::time_point since = Clock::now();
  for (int running; (running = g_running.load()) > 0;) {
    futex_wait_ms(&g_running, running, 10);
    const unsigned long now = g_progress.load();
    if (now != seen || g_waiting.load() < g_running.load()) {
      seen = now;
      since = Clock::now();
    } else if (Clock::now() - since >= std::chrono::milliseconds(g_deadlock_ms) &&
               !g_broken.load()) {
      deadlock();
    }
  }
  for (unsigned t = 0; t < L.block; ++t) pthread_join(threads[t], nullptr);
  return g_error.load();
}

// ------------------------------------------------ fibers

constexpr size_t kFiberStack = 128 * 1024;
char* g_stacks = nullptr;  // 1024 stacks, each above a guard page
size_t g_page = 4096;
void* g_main_sp = nullptr;  // the launching thread's context while fibers run
unsigned g_current = 0, g_live = 0;
unsigned long g_idle = 0;  // switches without progress, for deadlock detection
unsigned long g_seen_progress = 0;
#ifdef CUDASIM_UCONTEXT
ucontext_t g_main_ctx;
#endif

#ifndef CUDASIM_UCONTEXT
// cudasim_swap(save, load): saves the callee-saved registers, the x87 control word and
// MXCSR on the stack, stores the stack pointer in *save, and resumes the context whose
// stack pointer is `load` (x86-64 System V).
extern "C" void cudasim_swap(void** save, void* load);
asm(R"(
  .text
  .p2align 4
  .type cudasim_swap, @function
cudasim_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cudasim_swap, .-cudasim_swap
)");
#endif

[[noreturn]] void fiber_start();

char* stack_of(unsigned tid) { return g_stacks + tid * (kFiberStack + g_page) + g_page; }

// One stack per thread of the block, each above a guard page, mapped for one launch only:
// every module has its own copy of this runtime, and stacks kept per module would soon
// exhaust the process's memory mappings (each guard page splits the mapping).
size_t stacks_bytes(unsigned n) { return n * (kFiberStack + g_page); }

bool make_stacks(unsigned n) {
  g_page = (size_t)sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, stacks_bytes(n), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  g_stacks = static_cast<char*>(p);
  for (unsigned t = 0; t < n; ++t) mprotect(stack_of(t) - g_page, g_page, PROT_NONE);
  return true;
}

void free_stacks(unsigned n) {
  munmap(g_stacks, stacks_bytes(n));
  g_stacks = nullptr;
}

void init_fiber(Thread& th) {
#ifdef CUDASIM_UCONTEXT
  getcontext(&th.ctx);
  th.ctx.uc_stack.ss_sp = stack_of(th.tid);
  th.ctx.uc_stack.ss_size = kFiberStack;
  th.ctx.uc_link = nullptr;
  makecontext(&th.ctx, fiber_start, 0);
#else
  // the frame cudasim_swap pops: x87 control word and MXCSR (the launching thread's), six
  // registers, then it "returns" into fiber_start, the stack aligned as after a call
  uint64_t* ret = reinterpret_cast<uint64_t*>(stack_of(th.tid) + kFiberStack) - 2;
  ret[1] = 0;
  ret[0] = reinterpret_cast<uint64_t>(&fiber_start);
  uint64_t* sp = ret - 8;
  for (int i = 2; i < 8; ++i) sp[i] = 0;  // r15 r14 r13 r12 rbx rbp
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  sp[0] = fcw;
  sp[1] = mxcsr;
  th.sp = sp;
#endif
}

// Switch from `from` (a fiber, or the launching context if null) to fiber `to`.
void switch_to(Thread* from, Thread& to) {
  g_current = to.tid;
  threadIdx = {to.tid, 0, 0};
  t_self = &to;
#ifdef CUDASIM_UCONTEXT
  swapcontext(from ? &from->ctx : &g_main_ctx, &to.ctx);
#else
  cudasim_swap(from ? &from->sp : &g_main_sp, to.sp);
#endif
}

void switch_to_main(Thread& from) {
#ifdef CUDASIM_UCONTEXT
  swapcontext(&from.ctx, &g_main_ctx);
#else
  cudasim_swap(&from.sp, g_main_sp);
#endif
}

[[noreturn]] void fiber_fail() {
  switch_to_main(g_launch.threads[g_current]);  // never resumed: the launch is abandoned
  abort();
}

Thread& next_live(unsigned after) {
  Launch& L = g_launch;
  unsigned t = after;
  do {
    t = t + 1 == L.block ? 0 : t + 1;
  } while (L.threads[t].done && t != after);
  return L.threads[t];
}

void fiber_yield() {
  Thread& me = g_launch.threads[g_current];
  const unsigned long p = g_progress.load(std::memory_order_relaxed);
  if (p != g_seen_progress) {
    g_seen_progress = p;
    g_idle = 0;
  } else if (++g_idle > 2ul * g_live + 8) {  // a full round of switches changed nothing
    deadlock();
  }
  Thread& next = next_live(me.tid);
  if (&next != &me) switch_to(&me, next);
}

[[noreturn]] void fiber_start() {
  Launch& L = g_launch;
  const unsigned tid = g_current;
  L.body(L.args);
  exit_thread(L, tid);
  if (--g_live == 0) switch_to_main(L.threads[tid]);
  switch_to(&L.threads[tid], next_live(tid));  // never comes back: this fiber is done
  abort();
}

int run_fibers(Launch& L) {
  if (!make_stacks(L.block)) return 12;  // ENOMEM
  for (unsigned b = 0; b < L.grid && g_error.load() == kOk; ++b) {
    blockIdx = {b, 0, 0};
    g_block_now = b;
    reset_block(L);
    for (unsigned t = 0; t < L.block; ++t) init_fiber(L.threads[t]);
    g_live = L.block;
    g_idle = 0;
    switch_to(nullptr, L.threads[0]);
  }
  free_stacks(L.block);
  return g_error.load();
}

// Runs `body` (which calls the kernel) for every thread of every block. Returns 0, an
// errno if the threads or stacks could not be made, or an Error (then cudasim_error says
// what happened).
int run(unsigned grid, unsigned block, void (*body)(void* const*), void* const* args,
        bool fibers) {
  Launch& L = g_launch;
  L.grid = grid;
  L.block = block;
  L.body = body;
  L.args = args;
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned t = 0; t < block; ++t) L.threads[t].tid = t;
  reset_block(L);
  g_fibers = fibers;
  g_error = kOk;
  g_message[0] = 0;
  Thread* saved_self = t_self;
  const uint3 saved_thread = threadIdx, saved_block = blockIdx;
  const int rc = fibers ? run_fibers(L) : run_os_threads(L);
  t_self = saved_self;
  threadIdx = saved_thread;
  blockIdx = saved_block;
  return rc;
}

// ---------------------------------------------------------------- warp operations

inline Warp& my_warp() { return g_launch.warps[threadIdx.x / 32]; }

enum Op : unsigned { kSyncwarp = 1, kShfl, kShflDown, kShflUp, kShflXor, kBallot, kAny, kAll };

// What a lane's warp operation is: its kind, value type, width and warp-uniform parameter
// (delta or lane mask; not the source lane of __shfl_sync, which may differ per lane).
template <typename T> unsigned long long signature(Op op, unsigned param, int width) {
  return (unsigned long long)op | (unsigned long long)sizeof(T) << 8 |
         (unsigned long long)std::is_floating_point_v<T> << 15 |
         (unsigned long long)(width & 0xffff) << 16 | (unsigned long long)param << 32;
}

// Every live lane of the warp publishes `bits` and its operation; the last to arrive at the
// warp's barrier checks that all live lanes do the same operation with the same mask,
// covering them all. Returns the buffer to read. Double buffering: a lane can overwrite its
// slot only after passing the next barrier, when every lane has read it.
inline unsigned publish(unsigned long long bits, unsigned long long sig, unsigned mask) {
  Warp& w = my_warp();
  const unsigned lane = threadIdx.x % 32;
  const unsigned buf = t_self->round++ & 1u;
  w.slot[buf][lane] = bits;
  w.sig[buf][lane] = sig;
  w.mask[buf][lane] = mask;
  w.barrier.wait([&] {
    const unsigned alive = w.alive.load(std::memory_order_relaxed);
    for (unsigned l = 0; l < 32; ++l)
      if ((alive >> l & 1u) && (w.sig[buf][l] != sig || w.mask[buf][l] != mask))
        fail(kDivergent, "divergent warp operation: the live lanes of a warp reached "
                         "different shuffles, votes or __syncwarp (one skipped by some "
                         "lanes?); CUDA requires every lane named in the mask to execute the "
                         "same one");
    if ((mask & alive) != alive)
      fail(kDivergent, "a warp operation whose mask leaves out live lanes: cudasim emulates "
                       "shuffles and votes of every live lane only");
  });
  return buf;
}

template <typename T, typename F>
T shuffle(T v, unsigned mask, unsigned long long sig, F&& src) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a 1-8 byte type");
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  const unsigned buf = publish(bits, sig, mask);
  T r;
  std::memcpy(&r, &my_warp().slot[buf][src(threadIdx.x % 32) % 32], sizeof(T));
  return r;
}

// The live lanes whose predicate holds, and the live lanes.
inline unsigned vote(bool pred, unsigned mask, Op op, unsigned* alive) {
  const unsigned buf = publish(pred ? 1 : 0, signature<int>(op, 0, 32), mask);
  Warp& w = my_warp();
  *alive = w.alive.load(std::memory_order_relaxed);
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    if ((*alive >> l & 1u) && w.slot[buf][l]) bits |= 1u << l;
  return bits;
}

}  // namespace
}  // namespace cudasim

extern "C" __attribute__((visibility("default"))) const char* cudasim_error() {
  return cudasim::g_message;
}
extern "C" __attribute__((visibility("default"))) void cudasim_set_deadlock_ms(int ms) {
  cudasim::g_deadlock_ms = ms;
}

// ---------------------------------------------------------------- synchronisation, warps

__device__ __forceinline__ void __syncthreads() { cudasim::g_launch.block_barrier.wait(); }
__device__ __forceinline__ void __syncwarp(unsigned mask = 0xffffffffu) {
  cudasim::publish(0, cudasim::signature<int>(cudasim::kSyncwarp, 0, 32), mask);
}
__device__ __forceinline__ void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
__device__ __forceinline__ void __threadfence_block() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
// Shuffles and votes: every live lane of the warp must execute the same one (see publish).
template <typename T>
__device__ __forceinline__ T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return cudasim::shuffle(v, mask, cudasim::signature<T>(cudasim::kShfl, 0, width),
                          [&](unsigned lane) {
                            return (lane / width) * width + ((unsigned)src % (unsigned)width);
                          });
}
template <typename T>
__device__ __forceinline__ T __shfl_down_sync(unsigned mask, T v, unsigned delta,
                                              int width = 32) {
  return cudasim::shuffle(v, mask, cudasim::signature<T>(cudasim::kShflDown, delta, width),
                          [&](unsigned lane) {
                            return lane % width + delta < (unsigned)width ? lane + delta : lane;
                          });
}
template <typename T>
__device__ __forceinline__ T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cudasim::shuffle(v, mask, cudasim::signature<T>(cudasim::kShflUp, delta, width),
                          [&](unsigned lane) { return lane % width >= delta ? lane - delta : lane; });
}
template <typename T>
__device__ __forceinline__ T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return cudasim::shuffle(v, mask, cudasim::signature<T>(cudasim::kShflXor, lane_mask, width),
                          [&](unsigned lane) {
                            const unsigned s = lane ^ (unsigned)lane_mask;
                            return s / width == lane / width ? s : lane;
                          });
}
__device__ __forceinline__ unsigned __ballot_sync(unsigned mask, int pred) {
  unsigned alive;
  return cudasim::vote(pred != 0, mask, cudasim::kBallot, &alive);
}
__device__ __forceinline__ int __any_sync(unsigned mask, int pred) {
  unsigned alive;
  return cudasim::vote(pred != 0, mask, cudasim::kAny, &alive) != 0;
}
__device__ __forceinline__ int __all_sync(unsigned mask, int pred) {
  unsigned alive;
  return cudasim::vote(pred != 0, mask, cudasim::kAll, &alive) == alive;
}
__device__ __forceinline__ unsigned __activemask() {
  return cudasim::my_warp().alive.load(std::memory_order_relaxed);
}

// ---------------------------------------------------------------- atomics

// (tracejit's kernels use none; atomicAdd is what a scatter kernel would use)
template <typename T> __device__ __forceinline__ T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}

#define CUDASIM_EXPORT extern "C" __attribute__((visibility("default")))

#endif  // CUDASIM_SHIM_H
