// Package check holds the end-to-end GPU checks of the gpu packages as
// scripts (see README.md); its tests run them with stub tools in place of
// nvidia-smi and PyTorch, to check the paths that need no GPU: the skip on
// a machine without one, and that an interrupted run stops its ranks.
package check
