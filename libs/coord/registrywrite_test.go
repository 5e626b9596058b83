package coord

import (
	"context"
	"testing"
	"time"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// A permanent entry stays until deleted; a leased one expires, nothing
// renewing it.
func TestPutAndDeleteEndpoint(t *testing.T) {
	cli := integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool := "put-" + time.Now().Format("150405.000000")
	perm := &registryv1.Endpoint{Pool: pool, Name: "vm-a", Address: "10.0.0.5", Port: 8000, Model: "llama"}
	if _, err := PutEndpoint(ctx, cli, perm, 0); err != nil {
		t.Fatal(err)
	}
	leased := &registryv1.Endpoint{Pool: pool, Name: "vm-b", Address: "10.0.0.6", Port: 8000}
	if _, err := PutEndpoint(ctx, cli, leased, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	snap, err := LoadSnapshot(ctx, cli, pool)
	if err != nil || len(snap.Endpoints) != 2 || snap.Endpoints["vm-a"].GetRegisteredAt() == nil {
		t.Fatalf("snapshot %v %v", snap.Endpoints, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, err = LoadSnapshot(ctx, cli, pool)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := snap.Endpoints["vm-b"]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leased entry did not expire")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, ok := snap.Endpoints["vm-a"]; !ok {
		t.Fatal("the permanent entry expired")
	}
	if ok, err := DeleteEndpoint(ctx, cli, pool, "vm-a"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := DeleteEndpoint(ctx, cli, pool, "vm-a"); ok || err != nil {
		t.Fatalf("delete again: %v %v", ok, err)
	}
	if _, err := PutEndpoint(ctx, cli, &registryv1.Endpoint{Pool: pool, Name: "bad/name"}, 0); err == nil {
		t.Fatal("a bad name was written")
	}
}
