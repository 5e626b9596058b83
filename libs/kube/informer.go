package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Resource is what an informer lists and watches, as the logs of its
// failures name it.
type Resource struct {
	// GVR is the resource's group, version and resource. The hints name
	// its resource.group (e.g. variantautoscalings.llmd.ai, pods).
	GVR schema.GroupVersionResource
	// Kind names its objects in logs, e.g. "VariantAutoscaling".
	Kind string
	// CRD says a CustomResourceDefinition defines the resource: a list
	// that finds no such resource is then taken for the CRD missing.
	CRD bool
}

// NewInformer returns a dynamic informer over the objects of res in
// namespace ("": every namespace), whose lists and watches tweak filters
// (none when nil), resynced every resync (0: never). The failures of its
// lists and watches, which it retries, are logged to log
// (WatchErrorHandler). Run runs it.
func NewInformer(client dynamic.Interface, res Resource, namespace string, resync time.Duration,
	tweak dynamicinformer.TweakListOptionsFunc, log *slog.Logger,
) (cache.SharedIndexInformer, error) {
	inf := dynamicinformer.NewFilteredDynamicInformer(client, res.GVR, namespace, resync, cache.Indexers{}, tweak).Informer()
	if err := inf.SetWatchErrorHandlerWithContext(WatchErrorHandler(res, log)); err != nil {
		return nil, fmt.Errorf("%s informer: %w", res.Kind, err)
	}
	return inf, nil
}

// WatchErrorHandler returns a handler of an informer's failed lists and
// watches (SetWatchErrorHandlerWithContext) that logs them to log; the
// informer retries with backoff. A watch closed normally (io.EOF) is not
// logged, an expired one (the informer lists again) at debug level, every
// other failure as a warning, with a hint for a CRD not installed or not
// serving the version (a CRD's resource not found) and for missing RBAC
// (forbidden).
func WatchErrorHandler(res Resource, log *slog.Logger) cache.WatchErrorHandlerWithContext {
	name := res.GVR.GroupResource().String()
	return func(_ context.Context, _ *cache.Reflector, err error) {
		switch {
		case errors.Is(err, io.EOF):
			// a watch closed normally
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			log.Debug(res.Kind+" watch expired; listing again", "error", err)
		case res.CRD && apierrors.IsNotFound(err):
			log.Warn(res.Kind+" list failed: is the CRD "+name+" installed, serving "+res.GVR.Version+"? Retrying", "error", err)
		case apierrors.IsForbidden(err):
			log.Warn(res.Kind+" list forbidden: grant get, list and watch on "+name+". Retrying", "error", err)
		default:
			log.Warn(res.Kind+" list or watch failed; retrying", "error", err)
		}
	}
}

// Run runs inf until ctx ends, client-go's logs going to log (WithLogger),
// and returns a channel closed once inf has stopped.
func Run(ctx context.Context, inf cache.SharedInformer, log *slog.Logger) <-chan struct{} {
	ctx = WithLogger(ctx, log)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	return done
}

// WithLogger returns ctx with log as its klog logger, the one client-go's
// informers, reflectors and error handlers log to when run with ctx.
func WithLogger(ctx context.Context, log *slog.Logger) context.Context {
	return klog.NewContext(ctx, logr.FromSlogHandler(log.Handler()))
}
