// Package gpu finds the GPUs of a machine and gives the rest of metaroce one
// buffer abstraction over host memory, pinned host memory and HIP or CUDA
// device memory.
//
// Nothing here links against a GPU SDK. AMD GPUs are found in the KFD topology
// of sysfs, NVIDIA GPUs in /proc/driver/nvidia and, when it loads, through
// libcuda.so.1; the HIP and CUDA runtimes (libamdhip64, libcudart) are opened
// with dlopen when device memory is asked for. Discovery takes an fs.FS rooted
// at "/" so that tests feed it fake sysfs and procfs trees.
//
// Host memory is the default. When no GPU is present, the one-line
// Report.Summary says so; the package never prints by itself.
package gpu
