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
 * and nvmlDeviceGetUtilizationRates, which the probe's sampling mode looks
 * up first; built with -DFAKE_NVML_NO_UTILIZATION it is left out (a driver
 * without it).
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

#define MAX_GPUS 64
struct nvmlDevice_st {
    unsigned int index;
    unsigned long utilCalls, memoryCalls; /* for the cycling sequences */
};
typedef struct nvmlDevice_st *nvmlDevice_t;

static struct nvmlDevice_st devices[MAX_GPUS];
static int initialized;

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

/* check validates a device handle: initialised, in range, not broken. */
static nvmlReturn_t check(nvmlDevice_t d) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (d < devices || d >= devices + gpus()) return NVML_ERROR_INVALID_ARGUMENT;
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
    for (unsigned int i = 0; i < MAX_GPUS; i++) devices[i] = (struct nvmlDevice_st){.index = i};
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
    snprintf(buf, sizeof buf, "GPU-a1b2c3%02x-8f2d-4c1b-9a3e-1c2d3e4f5a%02x", device->index, device->index);
    return copy(uuid, length, buf);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    logcall("nvmlDeviceGetMemoryInfo");
    nvmlReturn_t r = check(device);
    if (r != NVML_SUCCESS) return r;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = strtoull(env("FAKE_NVML_MEMORY", "85899345920"), NULL, 10);
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
    util->memory = util->gpu / 2;
    device->utilCalls++;
    return NVML_SUCCESS;
}
#endif
