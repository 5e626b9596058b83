package stackstate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if _, err := Read(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	s := &State{Pool: "p", Gateway: "127.0.0.1:1", Pickers: []Service{{Name: "picker-0", GRPC: "127.0.0.1:2", Ops: "127.0.0.1:3"}},
		Pods: []Pod{{Name: "vllm-sim-0", Address: "127.0.0.1:4", Speed: 0.5, PID: 7}}, PIDs: map[string]int{"gateway": 9}}
	if err := s.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil || back.Pickers[0].GRPC != "127.0.0.1:2" || back.Pods[0].Speed != 0.5 || back.PIDs["gateway"] != 9 {
		t.Fatalf("read back %+v, %v", back, err)
	}
	s.Children = []Child{
		{Name: "picker-0", Role: RolePicker, PID: 11, Ports: map[string]int{"grpc": 2, "ops": 3}, State: ChildReady, Restarts: 2, LastStart: time.Unix(100, 0)},
		{Name: "vllm-sim-0", Role: RolePod, State: ChildBackoff, LastExit: "signal: killed"},
	}
	if err := s.Write(path); err != nil {
		t.Fatal(err)
	}
	if back, err = Read(path); err != nil {
		t.Fatal(err)
	}
	if c, ok := back.Child("picker-0"); !ok || !c.Ready() || c.Ports["ops"] != 3 || c.Restarts != 2 || !c.LastStart.Equal(time.Unix(100, 0)) {
		t.Fatalf("picker-0 read back: %+v %v", c, ok)
	}
	if c, _ := back.Child("vllm-sim-0"); c.Ready() || c.PID != 0 || c.LastExit != "signal: killed" {
		t.Fatalf("a pod down read back: %+v", c)
	}
	if _, ok := back.Child("nope"); ok || len(back.ChildrenOf(RolePod)) != 1 || len(back.ChildrenOf(RoleGateway)) != 0 {
		t.Fatal("Child and ChildrenOf")
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Fatal("a broken state file was read")
	}
}
