package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// serveDCGM serves, on ln until ctx ends, the page a DCGM exporter
// DaemonSet on the fleet's node serves with DCGM_EXPORTER_KUBERNETES=true:
// DCGM_FI_DEV_GPU_UTIL of one GPU per pod, labelled with the pod's name.
func (f *Fleet) serveDCGM(ctx context.Context, ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(f.dcgmPage())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		f.log.Error("DCGM exporter page stopped", "error", err)
	}
}

// dcgmPage renders the exporter page.
func (f *Fleet) dcgmPage() []byte {
	var b bytes.Buffer
	b.WriteString("# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
	for i, p := range f.pods {
		cfg := p.Config()
		fmt.Fprintf(&b, "DCGM_FI_DEV_GPU_UTIL{gpu=\"%d\",UUID=\"GPU-sim-%s\",device=\"nvidia%d\",modelName=\"vllm-sim\",Hostname=%q,container=\"vllm\",namespace=\"default\",pod=%q} %s\n",
			i, cfg.Name, i, f.nodeAddress(), cfg.Name, strconv.FormatFloat(p.GPUUtilization(), 'f', -1, 64))
	}
	return b.Bytes()
}
