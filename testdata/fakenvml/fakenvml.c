/* fakenvml: a stand-in for the NVIDIA driver's libnvidia-ml.so.1, so that the
 * real loading path (dlopen through the loader's search path, then calls
 * into the library) is exercised on machines without a GPU.
 *
 * Build:  gcc -O2 -shared -fPIC -o DIR/libnvidia-ml.so.1 fakenvml.c
 * Use:    LD_LIBRARY_PATH=DIR paddle-gpu-probe
 *
 * It exports exactly the NVML entry points the probe may call, and nothing
 * else, so a call to any other symbol kills the caller with "undefined
 * symbol" as an older driver would:
 *   nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetCount_v2,
 *   nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
 *   nvmlDeviceGetMemoryInfo, nvmlSystemGetDriverVersion
 * and the entry points the probe looks up before calling them:
 *   nvmlDeviceGetUtilizationRates (left out when built with
 *     -DFAKE_NVML_NO_UTILIZATION: a driver without it),
 *   nvmlDeviceGetTotalEnergyConsumption (left out with -DFAKE_NVML_NO_ENERGY),
 *   nvmlDeviceGetMigMode, nvmlDeviceGetMaxMigDeviceCount,
 *   nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetGpuInstanceId,
 *   nvmlDeviceGetComputeInstanceId, nvmlDeviceGetAttributes_v2 (all left
 *     out with -DFAKE_NVML_NO_MIG: a driver older than MIG),
 *   for the node mode (paddle-gpu-probe node): the compute, MPS-compute and
 *     graphics running-process lists (_v3 and _v2) and
 *     nvmlDeviceGetProcessUtilization (left out with -DFAKE_NVML_NO_PROCESSES),
 *     and the GPM entry points (left out with -DFAKE_NVML_NO_GPM); below.
 *
 * Environment (read at every call, so one build serves every test):
 *   FAKE_NVML_GPUS=N         devices (default 1, at most 64)
 *   FAKE_NVML_NAME=S         every device's name (default "NVIDIA A100-SXM4-80GB")
 *   FAKE_NVML_MEMORY=BYTES   every device's total memory (default 85899345920, 80 GiB)
 *   FAKE_NVML_DRIVER=S       driver version (default "550.54.15")
 *   FAKE_NVML_MODE=M         ok (default), or:
 *                              init_fail   nvmlInit_v2 returns FAKE_NVML_INIT_RETURN
 *                              init_hang   nvmlInit_v2 never returns
 *                              init_crash  nvmlInit_v2 dereferences NULL (SIGSEGV)
 *                              count_fail  nvmlDeviceGetCount_v2 returns 999 (unknown)
 *   FAKE_NVML_INIT_RETURN=N  the nvmlReturn_t of init_fail (default 18,
 *                            NVML_ERROR_LIB_RM_VERSION_MISMATCH, the classic
 *                            "driver/library version mismatch"; 9 is
 *                            NVML_ERROR_DRIVER_NOT_LOADED)
 *   FAKE_NVML_BROKEN=I       device I answers name, UUID and memory queries
 *                            with NVML_ERROR_GPU_IS_LOST (15)
 *   FAKE_NVML_INIT_DELAY_MS=N  nvmlInit_v2 sleeps N ms first (a slow driver)
 *   FAKE_NVML_UTIL=P,P,...   utilisation in percent (0-100) that
 *                            nvmlDeviceGetUtilizationRates returns, cycling:
 *                            a device's k-th call answers the k-th value
 *                            (modulo the count); default 0
 *   FAKE_NVML_UTIL_<I>=...   the same for device I only (I in decimal)
 *   FAKE_NVML_USED=B,B,...   used memory in bytes that nvmlDeviceGetMemoryInfo
 *                            returns, cycling per device and call as above;
 *                            default 1% of the total
 *   FAKE_NVML_USED_<I>=...   the same for device I only
 *   FAKE_NVML_SAMPLE_MODE=M  what nvmlDeviceGetUtilizationRates does after
 *                            FAKE_NVML_SAMPLE_OK calls (process-wide, default
 *                            0) answered normally: hang (never returns),
 *                            crash (SIGSEGV), fail (NVML_ERROR_GPU_IS_LOST),
 *                            unsupported (NVML_ERROR_NOT_SUPPORTED). Init and
 *                            the inventory are not affected.
 *   FAKE_NVML_LOG=PATH       append the name of every call to PATH, one a line
 *
 * Energy (nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver
 * loaded; MIG device handles answer NVML_ERROR_NOT_SUPPORTED, as NVML does):
 *   FAKE_NVML_ENERGY=E,E,... the counter's values, cycling per device and
 *                            call as FAKE_NVML_UTIL does; "unsupported":
 *                            NVML_ERROR_NOT_SUPPORTED. Default: the k-th call
 *                            of a device answers 1000000000 + 100000·k (the
 *                            counter rises 100 J a reading)
 *   FAKE_NVML_ENERGY_<I>=... the same for device I only
 *
 * MIG: device I has MIG mode on when FAKE_NVML_MIG_<I> lists its MIG
 * devices, in MIG device index order, each GI:CI:SLICES:MEMMB (GPU instance
 * id, compute instance id, gpuInstanceSliceCount (also
 * computeInstanceSliceCount), memorySizeMB), separated by commas, e.g.
 * "7:0:1:17920,8:0:1:17920,2:0:3:72192" (H200: 1g.18gb, 1g.18gb, 3g.71gb);
 * an entry GI:CI:SLICES:MEMMB:START also gives its GPU instance's placement
 * (nvmlDeviceGetGpuInstanceById, nvmlGpuInstanceGetInfo; below);
 * "none": MIG mode on without a MIG device; "off": MIG-capable, MIG mode
 * off. Unset: not MIG-capable (nvmlDeviceGetMigMode answers
 * NVML_ERROR_NOT_SUPPORTED). A value "@PATH" reads the list from the first
 * line of the file PATH, at every call, so a test can re-partition the GPU
 * between the probe and the sampler. A MIG device handle keeps naming its
 * (GI, CI): once they are gone from the list, its queries answer
 * NVML_ERROR_INVALID_ARGUMENT.
 *   FAKE_NVML_MIG_MAX=N      nvmlDeviceGetMaxMigDeviceCount (default 7, at most 8)
 * A MIG device has the parent's name, the UUID
 * MIG-a1b2c3PP-GGCC-4b1c-9d2e-0f1a2b3c4dPP (PP: the parent's index, GG and
 * CC: its GPU and compute instance ids, two hex digits each), its own
 * memory (total memorySizeMB MiB, used 1% of it or FAKE_NVML_USED), and
 * answers nvmlDeviceGetUtilizationRates with NVML_ERROR_NOT_SUPPORTED, as
 * NVML does on MIG devices.
 *
 * Processes (for paddle-node's streaming probe): FAKE_NVML_STATE=PATH names a
 * state file re-read at every call, so a test can change it while a probe
 * runs. One directive a line ('#' starts a comment):
 *   proc DEV[/GI] KIND PID USED [SM]  a process of device DEV (of its GPU
 *                            instance GI in MIG mode) in the KIND list
 *                            (compute, mps or graphics), USED bytes of GPU
 *                            memory, per-process SM utilisation SM (0-100,
 *                            or "-"/absent: not in the utilisation answer)
 *   util DEV P               device DEV's utilisation, overriding FAKE_NVML_UTIL
 *   procutil DEV ANSWER      nvmlDeviceGetProcessUtilization on DEV answers
 *                            ok (default), not_found or not_supported
 * A process line may repeat a PID (a process in two lists). The lists
 * (nvmlDeviceGetComputeRunningProcesses_v3, ..._MPSComputeRunningProcesses_v3,
 * ..._GraphicsRunningProcesses_v3, and their _v2 names) of a
 * whole GPU hold its lines without /GI; in MIG mode the parent's hold every
 * line of it, with the instance ids, and a MIG device handle's those of its
 * GPU instance. nvmlDeviceGetProcessUtilization answers, for each process of
 * a whole GPU with an SM value, two samples after the caller's timestamp: the
 * newest (timestamp 1000000 × the device's call number, SM) and an older one
 * half a second before it (SM + 50, modulo 101), so a caller that does not
 * keep the newest sample per PID reads the wrong value; MIG device handles
 * answer NVML_ERROR_NOT_SUPPORTED, as NVML does; no sample: NVML_ERROR_NOT_FOUND.
 * These are left out with -DFAKE_NVML_NO_PROCESSES (a driver without them).
 *   gpm DEV/GI P             GPM (nvmlGpmQueryDeviceSupport, nvmlGpmSampleAlloc,
 *                            nvmlGpmSampleFree, nvmlGpmMigSampleGet,
 *                            nvmlGpmMetricsGet) is supported on DEV, and GPU
 *                            instance GI's SM activity (NVML_GPM_METRIC_SM_UTIL)
 *                            between two samples is P percent; the metric
 *                            needs two samples of one instance. Without a gpm
 *                            line for DEV, GPM is not supported there. Left
 *                            out with -DFAKE_NVML_NO_GPM.
 *
 * Device i has the UUID GPU-a1b2c3NN-8f2d-4c1b-9a3e-1c2d3e4f5aNN (NN: i in
 * two hex digits), so device 0 is GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00;
 * "GPU-a1b2c3" is a prefix of every device's UUID, "GPU-a1b2c301" of
 * device 1's only.
 *
 * Like the real library, every query before a successful nvmlInit_v2 (or
 * after the matching nvmlShutdown) returns NVML_ERROR_UNINITIALIZED, and
 * nvmlErrorString works at any time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
        sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

#define MAX_GPUS 64
#define MAX_MIG 8
struct nvmlDevice_st {
    unsigned int index;                    /* a MIG device's: its parent's */
    int mig;                               /* a MIG device handle */
    unsigned int gi, ci;                   /* a MIG device's instance ids */
    unsigned long utilCalls, memoryCalls, energyCalls; /* for the cycling sequences */
    unsigned long procUtilCalls;           /* timestamps of nvmlDeviceGetProcessUtilization */
};
typedef struct nvmlDevice_st *nvmlDevice_t;

static struct nvmlDevice_st devices[MAX_GPUS];
static struct nvmlDevice_st migs[MAX_GPUS][MAX_MIG];
static int initialized;

struct instance {
    unsigned int gi, ci, slices;
    unsigned long long memMB;
    int start; /* the GPU instance's placement's first slice; -1: not given */
};

static void logcall(const char *name) {
    const char *path = getenv("FAKE_NVML_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", name);
    fclose(f);
}

static const char *env(const char *key, const char *def) {
    const char *v = getenv(key);
    return v && *v ? v : def;
}

static int mode(const char *m) { return strcmp(env("FAKE_NVML_MODE", "ok"), m) == 0; }

static unsigned int gpus(void) {
    long n = strtol(env("FAKE_NVML_GPUS", "1"), NULL, 10);
    if (n < 0) n = 0;
    if (n > MAX_GPUS) n = MAX_GPUS;
    return (unsigned int)n;
}

static int broken(nvmlDevice_t d) {
    const char *b = getenv("FAKE_NVML_BROKEN");
    return b && *b && strtol(b, NULL, 10) == (long)d->index;
}

/* migspec returns device i's FAKE_NVML_MIG_<I> ("@PATH" read from the
 * file into buf), or NULL when unset. */
static const char *migspec(unsigned int i, char *buf, size_t size) {
    char name[64];
    snprintf(name, sizeof name, "FAKE_NVML_MIG_%u", i);
    const char *v = getenv(name);
    if (!v || !*v) return NULL;
    if (v[0] != '@') return v;
    FILE *f = fopen(v + 1, "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)size, f)) buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\r\n")] = 0;
    return buf;
}

/* migmode: -1 not MIG-capable, 0 MIG mode off, 1 on. */
__attribute__((unused)) static int migmode(unsigned int i) {
    char buf[512];
    const char *s = migspec(i, buf, sizeof buf);
    if (!s) return -1;
    return strcmp(s, "off") == 0 ? 0 : 1;
}

/* instances parses device i's MIG device list into out; returns the count. */
static int instances(unsigned int i, struct instance *out) {
    char buf[512];
    const char *s = migspec(i, buf, sizeof buf);
    if (!s || strcmp(s, "off") == 0 || strcmp(s, "none") == 0) return 0;
    int n = 0;
    const char *p = s;
    while (*p && n < MAX_MIG) {
        struct instance in = {0};
        unsigned int start;
        int got = sscanf(p, "%u:%u:%u:%llu:%u", &in.gi, &in.ci, &in.slices, &in.memMB, &start);
        in.start = got == 5 ? (int)start : -1;
        if (got >= 4) out[n++] = in;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    return n;
}

__attribute__((unused)) static unsigned int migmax(void) {
    long n = strtol(env("FAKE_NVML_MIG_MAX", "7"), NULL, 10);
    if (n < 0) n = 0;
    if (n > MAX_MIG) n = MAX_MIG;
    return (unsigned int)n;
}

static int ismig(nvmlDevice_t d) {
    return d >= &migs[0][0] && d < &migs[0][0] + MAX_GPUS * MAX_MIG;
}

/* migof finds a MIG device handle's instance in the current list. */
static int migof(nvmlDevice_t d, struct instance *in) {
    struct instance list[MAX_MIG];
    int n = instances(d->index, list);
    for (int k = 0; k < n; k++)
        if (list[k].gi == d->gi && list[k].ci == d->ci) {
            *in = list[k];
            return 1;
        }
    return 0;
}

/* check validates a device handle: initialised, in range, not broken; a
 * MIG device handle's instance still exists. */
static nvmlReturn_t check(nvmlDevice_t d) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (ismig(d)) {
        struct instance in;
        if (d->index >= gpus() || !d->mig || !migof(d, &in)) return NVML_ERROR_INVALID_ARGUMENT;
    } else if (d < devices || d >= devices + gpus())
        return NVML_ERROR_INVALID_ARGUMENT;
    if (broken(d)) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

/* perdevice returns KEY_<index> if set, else KEY, else NULL. */
static const char *perdevice(const char *key, nvmlDevice_t d) {
    char name[64];
    snprintf(name, sizeof name, "%s_%u", key, d->index);
    const char *v = getenv(name);
    if (v && *v) return v;
    v = getenv(key);
    return v && *v ? v : NULL;
}

/* nth returns the k-th (modulo their count) of the comma-separated numbers. */
static unsigned long long nth(const char *list, unsigned long k) {
    unsigned long n = 1;
    for (const char *p = list; *p; p++)
        if (*p == ',') n++;
    k %= n;
    const char *p = list;
    while (k--) p = strchr(p, ',') + 1;
    return strtoull(p, NULL, 10);
}


/* The state file (FAKE_NVML_STATE): processes, utilisation overrides. */
#define MAX_PROCS 4096
struct proc {
    unsigned int dev, gi;
    int hasgi;
    char kind[16];
    unsigned int pid;
    unsigned long long used;
    int sm; /* -1: none */
};

/* readprocs reads the state file's process lines into out (at most max);
 * it returns the count. */
static int readprocs(struct proc *out, int max) {
    const char *path = getenv("FAKE_NVML_STATE");
    if (!path || !*path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        struct proc p = {.sm = -1};
        char where[32], sm[16] = "-";
        if (sscanf(line, "proc %31s %15s %u %llu %15s", where, p.kind, &p.pid, &p.used, sm) < 4) continue;
        if (sscanf(where, "%u/%u", &p.dev, &p.gi) == 2)
            p.hasgi = 1;
        else if (sscanf(where, "%u", &p.dev) != 1)
            continue;
        if (strcmp(sm, "-") != 0) p.sm = (int)strtol(sm, NULL, 10);
        out[n++] = p;
    }
    fclose(f);
    return n;
}

/* statevalue finds "KEY DEV VALUE" in the state file; copies VALUE. */
static int statevalue(const char *key, unsigned int dev, char *value, size_t size) {
    const char *path = getenv("FAKE_NVML_STATE");
    if (!path || !*path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256], k[32], v[64];
    unsigned int d;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%31s %u %63s", k, &d, v) == 3 && strcmp(k, key) == 0 && d == dev) {
            snprintf(value, size, "%s", v);
            found = 1;
        }
    fclose(f);
    return found;
}

static long stateutil(unsigned int dev) {
    char v[64];
    if (!statevalue("util", dev, v, sizeof v)) return -1;
    return strtol(v, NULL, 10);
}

static nvmlReturn_t copy(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    logcall("nvmlInit_v2");
    long delay = strtol(env("FAKE_NVML_INIT_DELAY_MS", "0"), NULL, 10);
    if (delay > 0) {
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (mode("init_fail")) return (nvmlReturn_t)strtol(env("FAKE_NVML_INIT_RETURN", "18"), NULL, 10);
    if (mode("init_hang"))
        for (;;) pause();
    if (mode("init_crash")) {
        /* A real fault, not raise(): a driver bug dereferences a bad pointer. */
        volatile int *p = NULL;
        *p = 1;
    }
    for (unsigned int i = 0; i < MAX_GPUS; i++) {
        devices[i] = (struct nvmlDevice_st){.index = i};
        for (unsigned int k = 0; k < MAX_MIG; k++) migs[i][k] = (struct nvmlDevice_st){.index = i};
    }
    initialized++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    logcall("nvmlShutdown");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    initialized--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    logcall("nvmlErrorString");
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    logcall("nvmlSystemGetDriverVersion");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    return copy(version, length, env("FAKE_NVML_DRIVER", "550.54.15"));
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    logcall("nvmlDeviceGetCount_v2");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (mode("count_fail")) return NVML_ERROR_UNKNOWN;
    *count = gpus();
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    logcall("nvmlDeviceGetHandleByIndex_v2");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= gpus()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    logcall("nvmlDeviceGetName");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    return copy(name, length, env("FAKE_NVML_NAME", "NVIDIA A100-SXM4-80GB"));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    logcall("nvmlDeviceGetUUID");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    char buf[96];
    if (device->mig)
        snprintf(buf, sizeof buf, "MIG-a1b2c3%02x-%02x%02x-4b1c-9d2e-0f1a2b3c4d%02x", device->index, device->gi & 0xff,
                 device->ci & 0xff, device->index);
    else
        snprintf(buf, sizeof buf, "GPU-a1b2c3%02x-8f2d-4c1b-9a3e-1c2d3e4f5a%02x", device->index, device->index);
    return copy(uuid, length, buf);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    logcall("nvmlDeviceGetMemoryInfo");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = strtoull(env("FAKE_NVML_MEMORY", "85899345920"), NULL, 10);
    struct instance in;
    if (device->mig && migof(device, &in)) memory->total = in.memMB << 20;
    memory->used = memory->total / 100;
    const char *used = perdevice("FAKE_NVML_USED", device);
    if (used) memory->used = nth(used, device->memoryCalls);
    device->memoryCalls++;
    memory->free = memory->used < memory->total ? memory->total - memory->used : 0;
    return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_UTILIZATION
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    static long calls;
    logcall("nvmlDeviceGetUtilizationRates");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!util) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig) return NVML_ERROR_NOT_SUPPORTED; /* as NVML on MIG devices */
    if (calls++ >= strtol(env("FAKE_NVML_SAMPLE_OK", "0"), NULL, 10)) {
        const char *m = env("FAKE_NVML_SAMPLE_MODE", "ok");
        if (strcmp(m, "hang") == 0)
            for (;;) pause();
        if (strcmp(m, "crash") == 0) {
            volatile int *p = NULL;
            *p = 1;
        }
        if (strcmp(m, "fail") == 0) return NVML_ERROR_GPU_IS_LOST;
        if (strcmp(m, "unsupported") == 0) return NVML_ERROR_NOT_SUPPORTED;
    }
    const char *seq = perdevice("FAKE_NVML_UTIL", device);
    util->gpu = seq ? (unsigned int)nth(seq, device->utilCalls) : 0;
    long over = stateutil(device->index);
    if (over >= 0) util->gpu = (unsigned int)over;
    util->memory = util->gpu / 2;
    device->utilCalls++;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_NO_ENERGY
EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
    logcall("nvmlDeviceGetTotalEnergyConsumption");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!energy) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig) return NVML_ERROR_NOT_SUPPORTED;
    const char *seq = perdevice("FAKE_NVML_ENERGY", device);
    if (seq && strcmp(seq, "unsupported") == 0) return NVML_ERROR_NOT_SUPPORTED;
    *energy = seq ? nth(seq, device->energyCalls) : 1000000000ULL + 100000ULL * device->energyCalls;
    device->energyCalls++;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_NO_MIG
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    logcall("nvmlDeviceGetMigMode");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    int m = device->mig ? -1 : migmode(device->index);
    if (m < 0) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)m;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    logcall("nvmlDeviceGetMaxMigDeviceCount");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig || migmode(device->index) < 0) return NVML_ERROR_NOT_SUPPORTED;
    *count = migmax();
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    logcall("nvmlDeviceGetMigDeviceHandleByIndex");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!mig || device->mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (migmode(device->index) != 1) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= migmax()) return NVML_ERROR_INVALID_ARGUMENT;
    struct instance list[MAX_MIG];
    int n = instances(device->index, list);
    if ((int)index >= n) return NVML_ERROR_NOT_FOUND;
    struct nvmlDevice_st *h = &migs[device->index][index];
    if (!h->mig || h->gi != list[index].gi || h->ci != list[index].ci)
        *h = (struct nvmlDevice_st){.index = device->index, .mig = 1, .gi = list[index].gi, .ci = list[index].ci};
    *mig = h;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    logcall("nvmlDeviceGetGpuInstanceId");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!id || !device->mig) return NVML_ERROR_INVALID_ARGUMENT;
    *id = device->gi;
    return NVML_SUCCESS;
}

/* GPU instance handles (nvmlDeviceGetGpuInstanceById, nvmlGpuInstanceGetInfo):
 * the placement of an instance whose FAKE_NVML_MIG_<I> entry gives a fifth
 * field, GI:CI:SLICES:MEMMB:START; without it nvmlGpuInstanceGetInfo answers
 * NVML_ERROR_NOT_SUPPORTED. */
typedef struct nvmlGpuInstance_st {
    unsigned int index, gi;
} *nvmlGpuInstance_t;
typedef struct {
    unsigned int start, size;
} nvmlGpuInstancePlacement_t;
typedef struct {
    nvmlDevice_t device;
    unsigned int id, profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;
static struct nvmlGpuInstance_st gihandles[MAX_GPUS][MAX_MIG];

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gi) {
    logcall("nvmlDeviceGetGpuInstanceById");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!gi || device->mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (migmode(device->index) != 1) return NVML_ERROR_NOT_SUPPORTED;
    struct instance list[MAX_MIG];
    int n = instances(device->index, list);
    for (int k = 0; k < n; k++)
        if (list[k].gi == id) {
            gihandles[device->index][k] = (struct nvmlGpuInstance_st){.index = device->index, .gi = id};
            *gi = &gihandles[device->index][k];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info) {
    logcall("nvmlGpuInstanceGetInfo");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!gi || !info || gi->index >= gpus()) return NVML_ERROR_INVALID_ARGUMENT;
    struct instance list[MAX_MIG];
    int n = instances(gi->index, list);
    for (int k = 0; k < n; k++)
        if (list[k].gi == gi->gi) {
            if (list[k].start < 0) return NVML_ERROR_NOT_SUPPORTED;
            *info = (nvmlGpuInstanceInfo_t){.device = &devices[gi->index], .id = gi->gi,
                .placement = {.start = (unsigned int)list[k].start, .size = list[k].slices}};
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INVALID_ARGUMENT; /* the instance is gone */
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    logcall("nvmlDeviceGetComputeInstanceId");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!id || !device->mig) return NVML_ERROR_INVALID_ARGUMENT;
    *id = device->ci;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
    logcall("nvmlDeviceGetAttributes_v2");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!attributes) return NVML_ERROR_INVALID_ARGUMENT;
    struct instance in;
    if (!device->mig || !migof(device, &in)) return NVML_ERROR_NOT_SUPPORTED;
    *attributes = (nvmlDeviceAttributes_t){
        .multiprocessorCount = 16 * in.slices,
        .gpuInstanceSliceCount = in.slices,
        .computeInstanceSliceCount = in.slices,
        .memorySizeMB = in.memMB,
    };
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_NO_PROCESSES
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/* processes answers a running-process list of KIND on device. */
static nvmlReturn_t processes(const char *kind, nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_t *infos) {
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    static struct proc list[MAX_PROCS];
    int n = readprocs(list, MAX_PROCS);
    int inmig = !device->mig && migmode(device->index) == 1;
    unsigned int k = 0;
    for (int i = 0; i < n; i++) {
        struct proc *p = &list[i];
        if (p->dev != device->index || strcmp(p->kind, kind) != 0) continue;
        if (device->mig ? !(p->hasgi && p->gi == device->gi) : (!inmig && p->hasgi)) continue;
        if (infos && k < *count)
            infos[k] = (nvmlProcessInfo_t){.pid = p->pid, .usedGpuMemory = p->used,
                                           .gpuInstanceId = p->hasgi ? p->gi : 0xFFFFFFFFu,
                                           .computeInstanceId = p->hasgi ? 0 : 0xFFFFFFFFu};
        k++;
    }
    if (k > *count || (k > 0 && !infos)) {
        *count = k;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = k;
    return NVML_SUCCESS;
}

#define PROCESS_LIST(name, kind)                                                                          \
    EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_t *infos) {         \
        logcall(#name);                                                                                   \
        return processes(kind, device, count, infos);                                                     \
    }
PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v3, "compute")
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, "mps")
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, "graphics")
PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v2, "compute")
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, "mps")
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, "graphics")

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count, unsigned long long lastSeen) {
    logcall("nvmlDeviceGetProcessUtilization");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig) return NVML_ERROR_NOT_SUPPORTED;
    char answer[64];
    if (statevalue("procutil", device->index, answer, sizeof answer)) {
        if (strcmp(answer, "not_supported") == 0) return NVML_ERROR_NOT_SUPPORTED;
        if (strcmp(answer, "not_found") == 0) return NVML_ERROR_NOT_FOUND;
    }
    if (!samples) device->procUtilCalls++; /* a new reading: the size query starts it */
    unsigned long long newest = 1000000ULL * device->procUtilCalls, older = newest - 500000ULL;
    static struct proc list[MAX_PROCS];
    int n = readprocs(list, MAX_PROCS);
    unsigned int k = 0;
    for (int i = 0; i < n; i++) {
        struct proc *p = &list[i];
        if (p->dev != device->index || p->hasgi || p->sm < 0) continue;
        int dup = 0; /* one PID's samples once, however many lists it is in */
        for (int j = 0; j < i; j++)
            if (list[j].dev == p->dev && !list[j].hasgi && list[j].pid == p->pid && list[j].sm >= 0) dup = 1;
        if (dup) continue;
        nvmlProcessUtilizationSample_t two[2] = {
            {.pid = p->pid, .timeStamp = older, .smUtil = (unsigned int)((p->sm + 50) % 101)},
            {.pid = p->pid, .timeStamp = newest, .smUtil = (unsigned int)p->sm},
        };
        for (int t = 0; t < 2; t++) {
            if (two[t].timeStamp <= lastSeen) continue;
            if (samples && k < *count) samples[k] = two[t];
            k++;
        }
    }
    if (k == 0) return NVML_ERROR_NOT_FOUND;
    if (!samples || k > *count) {
        *count = k;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = k;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_NO_GPM
typedef struct {
    char *shortName, *longName, *unit;
} nvmlGpmMetricMetricInfo_t;

typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    nvmlGpmMetricMetricInfo_t metricInfo;
} nvmlGpmMetric_t;

struct nvmlGpmSample_st {
    unsigned int dev, gi;
    int taken;
    double sm;
};
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

typedef struct {
    unsigned int version, numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[477]; /* NVML_GPM_METRIC_MAX; only numMetrics are touched */
} nvmlGpmMetricsGet_t;

typedef struct {
    unsigned int version, isSupportedDevice;
} nvmlGpmSupport_t;

/* gpmvalue finds "gpm DEV/GI P" (gi < 0: any line of DEV) in the state file. */
static int gpmvalue(unsigned int dev, int gi, double *p) {
    const char *path = getenv("FAKE_NVML_STATE");
    if (!path || !*path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    unsigned int d, g;
    double v;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "gpm %u/%u %lf", &d, &g, &v) == 3 && d == dev && (gi < 0 || (int)g == gi)) {
            *p = v;
            found = 1;
        }
    fclose(f);
    return found;
}

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *support) {
    logcall("nvmlGpmQueryDeviceSupport");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!support) return NVML_ERROR_INVALID_ARGUMENT;
    double v;
    support->isSupportedDevice = !device->mig && gpmvalue(device->index, -1, &v);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    logcall("nvmlGpmSampleAlloc");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    *sample = calloc(1, sizeof **sample);
    return *sample ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    logcall("nvmlGpmSampleFree");
    free(sample);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gi, nvmlGpmSample_t sample) {
    logcall("nvmlGpmMigSampleGet");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!sample || device->mig) return NVML_ERROR_INVALID_ARGUMENT;
    double v;
    if (!gpmvalue(device->index, (int)gi, &v)) return NVML_ERROR_NOT_SUPPORTED;
    *sample = (struct nvmlGpmSample_st){.dev = device->index, .gi = gi, .taken = 1, .sm = v};
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m) {
    logcall("nvmlGpmMetricsGet");
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!m || !m->sample1 || !m->sample2 || !m->sample1->taken || !m->sample2->taken ||
        m->sample1->dev != m->sample2->dev || m->sample1->gi != m->sample2->gi)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < m->numMetrics; i++) {
        nvmlGpmMetric_t *x = &m->metrics[i];
        if (x->metricId == 2) { /* NVML_GPM_METRIC_SM_UTIL */
            x->nvmlReturn = NVML_SUCCESS;
            x->value = m->sample2->sm;
        } else
            x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}
#endif
