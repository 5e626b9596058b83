package stackstate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
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
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Fatal("a broken state file was read")
	}
}
