package gpu

// Report is the probe's answer: one JSON object on its standard output,
// written by cmd/paddle-gpu-probe and read by Probe. Both sides share this
// type, so the schema lives here, on the cgo-free side.
//
// A probe that could talk to NVML lists every device NVML enumerates, in
// NVML's order, unfiltered: CUDA_VISIBLE_DEVICES is applied by the reader.
//
// MIG: the GPUs whose current MIG mode is on are listed in Devices like the
// others (as NVML enumerates them) and named by index in MIGEnabled; their
// MIG instances are in MIGDevices, parent by parent in NVML's MIG device
// order, each as the task counts it (the parent's index, UUID and name,
// the instance's memory and MIG fields). The reader puts them in place of
// their parent (Select).
type Report struct {
	Devices       []Device `json:"devices"`
	MIGEnabled    []int    `json:"mig_enabled,omitempty"`
	MIGDevices    []Device `json:"mig_devices,omitempty"`
	DriverVersion string   `json:"driver_version,omitempty"`

	// Error is set when NVML could not be used at all (the library did not
	// load, nvmlInit failed, the device count failed); Devices is then empty.
	Error *NVMLError `json:"error,omitempty"`

	// Problems are failed queries that did not stop the count, such as one
	// device's UUID or the driver version; each names the call and device.
	Problems []string `json:"problems,omitempty"`
}

// NVMLError is an NVML call that failed, with its nvmlReturn_t code.
type NVMLError struct {
	Call    string `json:"call"`    // e.g. "nvmlInit_v2"
	Code    int    `json:"code"`    // the nvmlReturn_t
	Message string `json:"message"` // nvmlErrorString's text, for people
}

func (e *NVMLError) Error() string {
	return e.Call + ": " + e.Message
}

// nvmlReturn_t codes the reader acts on. They are NVML's stable ABI values
// (nvml.h), copied here because the package that defines them in Go
// (go-nvml) is cgo and must not be linked into the entrypoint.
const (
	// ReturnDriverNotLoaded is NVML_ERROR_DRIVER_NOT_LOADED: the library
	// is installed but no NVIDIA kernel driver runs (a CPU node).
	ReturnDriverNotLoaded = 9
	// ReturnLibraryNotFound is NVML_ERROR_LIBRARY_NOT_FOUND: dlopen of
	// libnvidia-ml.so.1 failed.
	ReturnLibraryNotFound = 12
)
