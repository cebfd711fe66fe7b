/*
 * warp_shim.c: the fast clock for programs whose clock reads and sleeps are raw system calls.
 *
 * libfaketime (preloaded beside this shim, conformance/adapters/warp.py) speeds up every clock
 * a program reads through libc, and the timeouts of the waits libc makes. Bun's Zig code
 * (opencode's executable) reads CLOCK_MONOTONIC and sleeps with inline `syscall` instructions,
 * and waits in epoll_pwait2, which libc does not wrap for it: its timers run in real time while
 * its Date.now() runs fast. This shim, in a constructor before any thread exists (x86_64):
 *
 *  1. finds the inline "mov $228,%eax ... syscall" (clock_gettime) and "mov $230,%eax ...
 *     syscall" (clock_nanosleep) sites of the main executable, keeping the address after each
 *     `syscall` (seccomp's instruction pointer); with none (a child such as bash or git that
 *     inherited the preload) it does nothing at all;
 *  2. answers those system calls from a SIGSYS handler through libc's clock_gettime and
 *     clock_nanosleep, that is through libfaketime;
 *  3. installs a seccomp filter (all threads) that traps clock_gettime and clock_nanosleep only
 *     from those exact sites (libc, the vDSO and libfaketime are never trapped: no recursion)
 *     and answers epoll_pwait2 with ENOSYS, after which Bun waits in libc's epoll_pwait for
 *     good, whose timeout libfaketime scales;
 *  4. keeps itself in a child that is the same executable (Bun spawns with vfork + execve).
 *
 * Where CPUID leaf 0x15 is filled in, Bun reads its timer clock with rdtsc, which no filter
 * can reach: the shim says so on stderr, and the calibration then measures the speed off and
 * refuses the warp. Switches: CONFORMANCE_WARP_SHIM_DEBUG=1 (log the sites), _DISABLE=1.
 * Built on first use with the system's C compiler: cc -O2 -fPIC -shared -o X.so warp_shim.c -ldl
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <dlfcn.h>
#include <time.h>
#include <cpuid.h>
#include <ucontext.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "x86_64 only (see notes for aarch64)"
#endif

#define MAX_SITES 64
static uint64_t sites[MAX_SITES];
static int nsites;
static int debug;

/* ---- SIGSYS handler: emulate the trapped syscall via libc (= libfaketime) ---- */
static void on_sigsys(int sig, siginfo_t *si, void *vctx)
{
    (void)sig;
    ucontext_t *uc = (ucontext_t *)vctx;
    greg_t *g = uc->uc_mcontext.gregs;
    int saved_errno = errno;
    long ret;

    switch (si->si_syscall) {
    case SYS_clock_gettime:
        ret = clock_gettime((clockid_t)g[REG_RDI], (struct timespec *)g[REG_RSI]) == 0 ? 0 : -errno;
        break;
    case SYS_clock_nanosleep: /* libc returns the error number directly */
        ret = -(long)clock_nanosleep((clockid_t)g[REG_RDI], (int)g[REG_RSI],
                                     (const struct timespec *)g[REG_RDX],
                                     (struct timespec *)g[REG_R10]);
        break;
    default:
        ret = -ENOSYS;
    }
    g[REG_RAX] = (greg_t)ret; /* RIP already points after the syscall insn */
    errno = saved_errno;
}

/* ---- find inline "mov $nr,%eax ... syscall" sites in the main executable ----
 * memchr() for the (rare) immediate byte, then check the 5-byte mov and look for
 * the `syscall` (0f 05) within the next few instructions. */
static void scan_range(const unsigned char *p, size_t len)
{
    static const unsigned char nrs[2] = {SYS_clock_gettime, SYS_clock_nanosleep};
    if (len < 8) return;
    const unsigned char *end = p + len;
    for (int k = 0; k < 2; k++) {
        const unsigned char *q = p + 1;
        while (q + 4 < end && (q = memchr(q, nrs[k], (size_t)(end - 4 - q))) != NULL) {
            if (q[-1] == 0xb8 && q[1] == 0 && q[2] == 0 && q[3] == 0) { /* mov $nr,%eax */
                const unsigned char *w = q + 4;
                for (int j = 0; j < 24 && w + j + 1 < end; j++) {
                    if (w[j] == 0xb8) break; /* another mov to eax: not ours */
                    if (w[j] == 0x0f && w[j + 1] == 0x05) {
                        if (nsites < MAX_SITES) sites[nsites++] = (uint64_t)(uintptr_t)(w + j + 2);
                        break;
                    }
                }
            }
            q++;
        }
    }
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size; (void)data;
    /* first object reported is the main program */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && (ph->p_flags & PF_R))
            scan_range((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz);
    }
    return 1; /* stop after the main program */
}

/* ---- seccomp ---- */
#define LD_W(off)        ((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off)))
#define JEQ(v, t, f)     ((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (v), (t), (f)))
#define RET(v)           ((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, (v)))
#define IP_LO offsetof(struct seccomp_data, instruction_pointer)
#define IP_HI (offsetof(struct seccomp_data, instruction_pointer) + 4)

static int install_filter(int want_epoll)
{
    struct sock_filter f[16 + 4 * MAX_SITES];
    int n = 0;
    f[n++] = LD_W(offsetof(struct seccomp_data, arch));
    f[n++] = JEQ(AUDIT_ARCH_X86_64, 1, 0);
    f[n++] = RET(SECCOMP_RET_ALLOW);
    f[n++] = LD_W(offsetof(struct seccomp_data, nr));
    if (want_epoll) {
        f[n++] = JEQ(SYS_epoll_pwait2, 0, 1);
        f[n++] = RET(SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
    }
    f[n++] = JEQ(SYS_clock_gettime, 1, 0);
    f[n++] = JEQ(SYS_clock_nanosleep, 0, (unsigned char)(0)); /* patched below */
    int jf_fixup = n - 1;
    /* per site: ld ip_hi; jeq hi ? next : skip2; ld ip_lo; jeq lo ? TRAP : next */
    int trap_at = n + 4 * nsites + 1; /* index of RET TRAP */
    for (int i = 0; i < nsites; i++) {
        f[n++] = LD_W(IP_HI);
        f[n++] = JEQ((uint32_t)(sites[i] >> 32), 0, 2);
        f[n++] = LD_W(IP_LO);
        f[n] = JEQ((uint32_t)sites[i], (unsigned char)(trap_at - n - 1), 0);
        n++;
    }
    f[n++] = RET(SECCOMP_RET_ALLOW); /* index trap_at-1 */
    f[n++] = RET(SECCOMP_RET_TRAP);  /* index trap_at */
    /* non-time syscalls jump to the ALLOW just before TRAP */
    f[jf_fixup].jf = (unsigned char)(trap_at - 1 - jf_fixup - 1);
    /* the "nr == clock_gettime" jump (jt=1) lands on the first site check */
    if (4 * nsites + 1 > 255) return -1;

    struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
    /* root (CAP_SYS_ADMIN) may install without no_new_privs; otherwise set it */
    long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
    if (r != 0 && errno == EACCES) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
        r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
    }
    return r == 0 ? 0 : -1;
}

/* This Bun build has a TSC fast path for its monotonic clock: if CPUID reports an
 * invariant TSC and leaf 0x15 (TSC/crystal ratio) is fully populated, it calibrates
 * once and then reads `rdtsc` directly - no syscall left to trap.  Detect it. */
static int bun_would_use_rdtsc(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000, NULL) < 0x80000007) return 0;
    __cpuid(0x80000007, a, b, c, d);
    if (!(d & 0x100)) return 0;
    if (__get_cpuid_max(0, NULL) < 0x15) return 0;
    __cpuid_count(0x15, 0, a, b, c, d);
    return a != 0 && b != 0 && c != 0;
}

/* ---- keep the shim in children that are this same executable ----
 * The seccomp filter is inherited across fork/exec and cannot be removed.  Only a
 * process whose syscall instructions sit at the recorded addresses is affected,
 * i.e. in practice only this same binary; if it were exec'd with LD_PRELOAD
 * scrubbed it would have no SIGSYS handler and die.  So when Bun execve()s its own
 * executable, re-add our LD_PRELOAD / FAKETIME.  Runs in a vfork child: no malloc,
 * stack buffers only. */
static char *saved_preload, *saved_faketime;
static dev_t self_dev;
static ino_t self_ino;
static int (*real_execve)(const char *, char *const[], char *const[]);

int execve(const char *path, char *const argv[], char *const envp[])
{
    if (!real_execve) real_execve = dlsym(RTLD_NEXT, "execve");
    struct stat st;
    if (saved_preload && stat(path, &st) == 0 && st.st_dev == self_dev && st.st_ino == self_ino) {
        size_t n = 0;
        int have = 0;
        for (; envp && envp[n]; n++)
            if (!strncmp(envp[n], "LD_PRELOAD=", 11) && strstr(envp[n], "warp_shim")) have = 1;
        if (!have && n < 4096) {
            char *nenv[n + 3];
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (strncmp(envp[i], "LD_PRELOAD=", 11) && (!saved_faketime || strncmp(envp[i], "FAKETIME=", 9)))
                    nenv[k++] = envp[i];
            nenv[k++] = saved_preload;
            if (saved_faketime) nenv[k++] = saved_faketime;
            nenv[k] = NULL;
            return real_execve(path, argv, nenv);
        }
    }
    return real_execve(path, argv, envp);
}

static char *dup_env_entry(const char *name)
{
    const char *v = getenv(name);
    if (!v) return NULL;
    size_t ln = strlen(name), lv = strlen(v);
    char *s = malloc(ln + lv + 2);
    if (!s) return NULL;
    memcpy(s, name, ln); s[ln] = '='; memcpy(s + ln + 1, v, lv + 1);
    return s;
}

__attribute__((constructor(101))) static void warp_shim_init(void)
{
    const char *e = getenv("CONFORMANCE_WARP_SHIM_DISABLE");
    if (e && *e == '1') return;
    debug = (e = getenv("CONFORMANCE_WARP_SHIM_DEBUG")) && *e == '1';

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t0);
    dl_iterate_phdr(phdr_cb, NULL);
    clock_gettime(CLOCK_MONOTONIC_RAW, &t1);
    if (nsites == 0) { /* not a Bun/Zig binary: leave the process untouched */
        if (debug) fprintf(stderr, "warp_shim: no raw clock syscall sites, not installing\n");
        return;
    }

    if (bun_would_use_rdtsc())
        fprintf(stderr, "warp_shim: WARNING: CPUID leaf 0x15 is populated; Bun will read its timer "
                        "clock with rdtsc and timers will NOT follow libfaketime on this host\n");

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) != 0) return;
    /* make sure SIGSYS is not blocked in this (and so in every later) thread */
    sigset_t ss; sigemptyset(&ss); sigaddset(&ss, SIGSYS);
    sigprocmask(SIG_UNBLOCK, &ss, NULL);

    struct stat st;
    if (stat("/proc/self/exe", &st) == 0) {
        self_dev = st.st_dev; self_ino = st.st_ino;
        saved_preload = dup_env_entry("LD_PRELOAD");
        saved_faketime = dup_env_entry("FAKETIME");
    }

    int want_epoll = !((e = getenv("CONFORMANCE_WARP_SHIM_NO_EPOLL")) && *e == '1');
    int rc = install_filter(want_epoll);
    if (debug) {
        fprintf(stderr, "warp_shim: %d sites (scan %.1f ms), filter %s\n", nsites,
                (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
                rc == 0 ? "installed" : "FAILED");
        for (int i = 0; i < nsites; i++) fprintf(stderr, "warp_shim:   ip %#lx\n", (unsigned long)sites[i]);
    }
}
