//go:build !linux

package kubeapi

import "os/exec"

// setParentDeathSignal does nothing where there is no parent-death signal:
// a test process that dies without Close leaves kube-apiserver running.
func setParentDeathSignal(*exec.Cmd) {}
