// Package check holds the end-to-end GPU check of the net plugin as a
// script, nccl_plugin.sh (see the net plugin's README); its tests run it
// with a stub python3, to check the paths that need no GPU: one SKIP line,
// without a Python traceback, when python3, PyTorch, a CUDA device or
// PyTorch's NCCL is missing.
package check
