/* nvidia-smi for the benchmark's GPU step: answers
 * `nvidia-smi --query-gpu=name --format=csv,noheader` (whatever the
 * arguments) with one GPU name per line, read from the NVML library the
 * loader finds, so the shell script pays what the real tool costs it: a
 * process, a dlopen of libnvidia-ml.so.1 and an NVML init. Without the
 * library it fails as the real tool does, printing nothing on stdout. */
#include <dlfcn.h>
#include <stdio.h>

#define NVML_OK 0

int main(void) {
	void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (nvml == NULL) {
		fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver: %s\n", dlerror());
		return 9;
	}
	int (*init)(void) = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
	int (*shutdown)(void) = (int (*)(void))dlsym(nvml, "nvmlShutdown");
	int (*count)(unsigned int *) = (int (*)(unsigned int *))dlsym(nvml, "nvmlDeviceGetCount_v2");
	int (*by_index)(unsigned int, void **) = (int (*)(unsigned int, void **))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
	int (*name_of)(void *, char *, unsigned int) = (int (*)(void *, char *, unsigned int))dlsym(nvml, "nvmlDeviceGetName");
	if (init == NULL || count == NULL || by_index == NULL || name_of == NULL || init() != NVML_OK) {
		fprintf(stderr, "NVIDIA-SMI has failed: NVML unusable\n");
		return 9;
	}
	unsigned int gpus = 0;
	int status = count(&gpus) == NVML_OK ? 0 : 9;
	for (unsigned int i = 0; status == 0 && i < gpus; i++) {
		void *device = NULL;
		char name[96];
		if (by_index(i, &device) == NVML_OK && name_of(device, name, sizeof name) == NVML_OK) {
			puts(name);
		}
	}
	if (shutdown != NULL) {
		shutdown();
	}
	return status;
}
