package chartcheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// check runs every check that holds for any render of the chart.
func check(t *testing.T, r *rendered) {
	t.Helper()
	checkUnique(t, r)
	checkNamesAndLabels(t, r)
	checkNoSecrets(t, r)
	for _, o := range r.byKind("Deployment") {
		d := o.Obj.(*appsv1.Deployment)
		checkPodSecurity(t, o, &d.Spec.Template.Spec)
		checkProbes(t, o, &d.Spec.Template.Spec)
		checkPodReferences(t, r, o, d)
		checkFlags(t, o, &d.Spec.Template.Spec)
		checkAddresses(t, r, o, &d.Spec.Template.Spec)
		checkFileArgs(t, o, d)
	}
	checkServices(t, r)
	checkSelectors(t, r)
	checkServiceMonitors(t, r)
	checkRBAC(t, r)
}

func checkUnique(t *testing.T, r *rendered) {
	t.Helper()
	seen := map[string]string{}
	for _, o := range r.objects {
		if prev, dup := seen[o.key()]; dup {
			t.Errorf("%s rendered twice (%s and %s)", o.key(), prev, o.Source)
		}
		seen[o.key()] = o.Source
	}
}

func checkNamesAndLabels(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.objects {
		name := o.Meta.GetName()
		var errs []string
		if o.GVK.Kind == "Service" {
			errs = validation.IsDNS1035Label(name)
		} else {
			errs = validation.IsDNS1123Subdomain(name)
		}
		if len(errs) > 0 {
			t.Errorf("%s: name %q: %s", o.Source, name, strings.Join(errs, "; "))
		}
		for k, v := range o.Meta.GetLabels() {
			if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
				t.Errorf("%s: label %s=%q: %s", o.Source, k, v, strings.Join(errs, "; "))
			}
		}
		if o.component() == "" {
			t.Errorf("%s: %s has no app.kubernetes.io/component label", o.Source, o.key())
		}
		if o.GVK.Kind != "ClusterRole" && o.GVK.Kind != "ClusterRoleBinding" && o.Meta.GetNamespace() == "" {
			t.Errorf("%s: %s has no namespace", o.Source, o.key())
		}
	}
}

// userinfoURL finds a URL carrying a password: scheme://user:pass@ (a
// password that is a $(VAR) reference, expanded by the kubelet, is fine).
var userinfoURL = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s"]*:([^/@\s"]+)@`)

// inlineCredential reports a credential written into a value.
func inlineCredential(s string) string {
	for _, m := range userinfoURL.FindAllStringSubmatch(s, -1) {
		if !strings.HasPrefix(m[1], "$(") {
			return m[0]
		}
	}
	// JSON configs (the responses store): a password or uri must be a reference
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		if bad := credentialInJSON(v); bad != "" {
			return bad
		}
	}
	return ""
}

func credentialInJSON(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (strings.EqualFold(k, "password") || strings.EqualFold(k, "uri")) && s != "" && !strings.HasPrefix(s, "$(") {
				return k + ": " + s
			}
			if bad := credentialInJSON(x); bad != "" {
				return bad
			}
		}
	case []any:
		for _, x := range v {
			if bad := credentialInJSON(x); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// checkNoSecrets: the chart renders no Secret, and no credential reaches a
// container but through a Secret reference.
func checkNoSecrets(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.byKind("Secret") {
		t.Errorf("%s: renders Secret %s: credentials must stay in the operator's Secrets (existingSecret)", o.Source, o.Meta.GetName())
	}
	for _, o := range r.byKind("Deployment") {
		for _, c := range o.Obj.(*appsv1.Deployment).Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				if bad := inlineCredential(a); bad != "" {
					t.Errorf("%s: container %s: argument with an inline credential: %s", o.Source, c.Name, bad)
				}
			}
			for _, e := range c.Env {
				if bad := inlineCredential(e.Value); bad != "" {
					t.Errorf("%s: container %s: env %s holds an inline credential: %s", o.Source, c.Name, e.Name, bad)
				}
				upper := strings.ToUpper(e.Name)
				if (strings.Contains(upper, "PASSWORD") || strings.Contains(upper, "SECRET_") || strings.HasSuffix(upper, "_URI")) &&
					(e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s: container %s: env %s is not from a Secret", o.Source, c.Name, e.Name)
				}
			}
		}
	}
}

func checkPodSecurity(t *testing.T, o *object, pod *corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil {
		t.Errorf("%s: pod has no securityContext", o.Source)
		psc = &corev1.PodSecurityContext{}
	}
	podSeccomp := psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	podNonRoot := psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	if !podNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot is not true", o.Source)
	}
	if !podSeccomp {
		t.Errorf("%s: pod securityContext.seccompProfile is not RuntimeDefault", o.Source)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("%s: pod uses the host's namespaces", o.Source)
	}
	containers := slices.Concat(pod.InitContainers, pod.Containers)
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: container %s has no securityContext", o.Source, c.Name)
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: container %s: allowPrivilegeEscalation is not false", o.Source, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: container %s: readOnlyRootFilesystem is not true", o.Source, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: container %s is privileged", o.Source, c.Name)
		}
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			t.Errorf("%s: container %s: runAsNonRoot is false", o.Source, c.Name)
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: container %s: seccompProfile %s", o.Source, c.Name, sc.SeccompProfile.Type)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: container %s does not drop ALL capabilities", o.Source, c.Name)
		} else if len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: container %s adds capabilities %v", o.Source, c.Name, sc.Capabilities.Add)
		}
	}
}

// checkProbes: liveness and readiness on every container, on a port it
// declares; HTTP probes ask /health (liveness) and /ready (readiness).
func checkProbes(t *testing.T, o *object, pod *corev1.PodSpec) {
	t.Helper()
	for _, c := range pod.Containers {
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for _, p := range []struct {
			kind, path string
			probe      *corev1.Probe
		}{{"liveness", "/health", c.LivenessProbe}, {"readiness", "/ready", c.ReadinessProbe}, {"startup", "/health", c.StartupProbe}} {
			if p.probe == nil {
				if p.kind != "startup" {
					t.Errorf("%s: container %s has no %s probe", o.Source, c.Name, p.kind)
				}
				continue
			}
			switch h := p.probe.ProbeHandler; {
			case h.HTTPGet != nil:
				if h.HTTPGet.Path != p.path {
					t.Errorf("%s: container %s: %s probe asks %s, want %s", o.Source, c.Name, p.kind, h.HTTPGet.Path, p.path)
				}
				if _, ok := ports[h.HTTPGet.Port.String()]; !ok && !slices.Contains(slices.Collect(maps.Values(ports)), h.HTTPGet.Port.IntVal) {
					t.Errorf("%s: container %s: %s probe on port %s, which it does not declare", o.Source, c.Name, p.kind, h.HTTPGet.Port.String())
				}
			case h.GRPC != nil:
				if !slices.Contains(slices.Collect(maps.Values(ports)), h.GRPC.Port) {
					t.Errorf("%s: container %s: %s gRPC probe on port %d, which it does not declare", o.Source, c.Name, p.kind, h.GRPC.Port)
				}
			default:
				t.Errorf("%s: container %s: %s probe is neither HTTP nor gRPC", o.Source, c.Name, p.kind)
			}
		}
	}
}

// checkPodReferences: the selector selects the pod template; volumes
// mounted exist; ConfigMaps and ServiceAccounts referenced are rendered;
// the token is mounted only for the pods that call the Kubernetes API.
func checkPodReferences(t *testing.T, r *rendered, o *object, d *appsv1.Deployment) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s: selector %v does not select the pod template's labels %v (%v)", o.Source, d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	pod := d.Spec.Template.Spec
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if v.ConfigMap != nil && r.get("ConfigMap", o.Meta.GetNamespace(), v.ConfigMap.Name) == nil {
			t.Errorf("%s: volume %s: ConfigMap %s is not rendered", o.Source, v.Name, v.ConfigMap.Name)
		}
	}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s: container %s mounts volume %s, which the pod does not have", o.Source, c.Name, m.Name)
			}
		}
	}
	// the chart's own ServiceAccount is named as the Deployment; another
	// name is one the operator created (serviceAccount.create false)
	if sa := pod.ServiceAccountName; sa == d.Name && r.get("ServiceAccount", o.Meta.GetNamespace(), sa) == nil {
		t.Errorf("%s: ServiceAccount %s is not rendered", o.Source, sa)
	} else if sa == "" {
		t.Errorf("%s: no serviceAccountName", o.Source)
	}
	if pod.AutomountServiceAccountToken == nil {
		t.Errorf("%s: automountServiceAccountToken is not set", o.Source)
	}
}

// checkFlags: every --flag argument and HERMOD_<FLAG> variable names a
// flag of the container's binary (when it is built).
func checkFlags(t *testing.T, o *object, pod *corev1.PodSpec) {
	t.Helper()
	for _, c := range pod.Containers {
		binary := binaryOf(c.Name)
		if !slices.Contains(services, c.Name) {
			t.Errorf("%s: container %s is not one of the services", o.Source, c.Name)
			continue
		}
		flags, ok := helpFlags(t, binary)
		known := func(name string) bool { return !ok || flags[name] }
		for _, a := range c.Args {
			if !strings.HasPrefix(a, "-") {
				t.Errorf("%s: container %s: argument %q is not a --flag[=value]", o.Source, c.Name, a)
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !known(name) {
				t.Errorf("%s: container %s: %s has no flag --%s", o.Source, c.Name, binary, name)
			}
		}
		for _, e := range c.Env {
			if rest, ok := strings.CutPrefix(e.Name, "HERMOD_"); ok {
				name := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
				if !known(name) {
					t.Errorf("%s: container %s: env %s names no flag of %s (--%s)", o.Source, c.Name, e.Name, binary, name)
				}
			}
		}
	}
}

// checkAddresses: the addresses one service is given of another
// (name.namespace.svc:port) are Services of this render, on a port they
// serve.
func checkAddresses(t *testing.T, r *rendered, o *object, pod *corev1.PodSpec) {
	t.Helper()
	for _, c := range pod.Containers {
		for _, a := range c.Args {
			name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name != "picker-addrs" && name != "indexer-address" && name != "responses-address" {
				continue
			}
			for addr := range strings.SplitSeq(value, ",") {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					t.Errorf("%s: --%s=%s: %v", o.Source, name, value, err)
					continue
				}
				parts := strings.Split(host, ".")
				if len(parts) < 3 || parts[2] != "svc" {
					continue // an address from the values, not one of the release's Services
				}
				svc := r.get("Service", parts[1], parts[0])
				if svc == nil {
					t.Errorf("%s: --%s=%s: Service %s/%s is not rendered", o.Source, name, value, parts[1], parts[0])
					continue
				}
				n, _ := strconv.Atoi(port)
				if !slices.ContainsFunc(svc.Obj.(*corev1.Service).Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == n }) {
					t.Errorf("%s: --%s=%s: Service %s has no port %s", o.Source, name, value, parts[0], port)
				}
			}
		}
	}
}

// podsSelectedBy returns the Deployments whose pod template the selector
// selects.
func podsSelectedBy(r *rendered, ns string, sel labels.Selector) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, o := range r.byKind("Deployment") {
		d := o.Obj.(*appsv1.Deployment)
		if d.Namespace == ns && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d)
		}
	}
	return out
}

// checkServices: each Service selects exactly one Deployment, whose
// container declares every targetPort.
func checkServices(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.byKind("Service") {
		s := o.Obj.(*corev1.Service)
		ds := podsSelectedBy(r, s.Namespace, labels.SelectorFromSet(s.Spec.Selector))
		if len(s.Spec.Selector) == 0 || len(ds) != 1 {
			t.Errorf("%s: Service %s selects %d Deployments, want 1", o.Source, s.Name, len(ds))
			continue
		}
		declared := map[string]bool{}
		for _, c := range ds[0].Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				declared[p.Name] = true
				declared[strconv.Itoa(int(p.ContainerPort))] = true
			}
		}
		for _, p := range s.Spec.Ports {
			if !declared[p.TargetPort.String()] {
				t.Errorf("%s: Service %s port %s: targetPort %s is not a port of %s", o.Source, s.Name, p.Name, p.TargetPort.String(), ds[0].Name)
			}
		}
	}
}

// checkSelectors: PodDisruptionBudgets select one Deployment and
// HorizontalPodAutoscalers scale a rendered one.
func checkSelectors(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.byKind("PodDisruptionBudget") {
		p := o.Obj.(*policyv1.PodDisruptionBudget)
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("%s: PodDisruptionBudget %s: selector %v (%v)", o.Source, p.Name, p.Spec.Selector, err)
			continue
		}
		if n := len(podsSelectedBy(r, p.Namespace, sel)); n != 1 {
			t.Errorf("%s: PodDisruptionBudget %s selects %d Deployments, want 1", o.Source, p.Name, n)
		}
		if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
			t.Errorf("%s: PodDisruptionBudget %s: want exactly one of minAvailable and maxUnavailable", o.Source, p.Name)
		}
	}
	for _, o := range r.byKind("HorizontalPodAutoscaler") {
		h := o.Obj.(*autoscalingv2.HorizontalPodAutoscaler)
		ref := h.Spec.ScaleTargetRef
		d := r.get(ref.Kind, h.Namespace, ref.Name)
		if ref.APIVersion != "apps/v1" || d == nil {
			t.Errorf("%s: HorizontalPodAutoscaler %s scales %s %s, which is not rendered", o.Source, h.Name, ref.Kind, ref.Name)
		} else if d.Obj.(*appsv1.Deployment).Spec.Replicas != nil {
			t.Errorf("%s: Deployment %s sets replicas while an HPA scales it", d.Source, ref.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas < *h.Spec.MinReplicas || len(h.Spec.Metrics) == 0 {
			t.Errorf("%s: HorizontalPodAutoscaler %s: replicas %v..%d, %d metrics", o.Source, h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas, len(h.Spec.Metrics))
		}
	}
}

var promDuration = regexp.MustCompile(`^(([0-9]+)(y|w|d|h|m|s|ms))+$`)

// checkServiceMonitors: each selects a Service of its namespace that has
// the endpoint's port, with valid durations.
func checkServiceMonitors(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.byKind("ServiceMonitor") {
		sm := o.Obj.(*serviceMonitor)
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("%s: ServiceMonitor %s: selector %v (%v)", o.Source, sm.Name, sm.Spec.Selector, err)
			continue
		}
		if len(sm.Spec.Endpoints) == 0 {
			t.Errorf("%s: ServiceMonitor %s has no endpoints", o.Source, sm.Name)
		}
		for _, ep := range sm.Spec.Endpoints {
			if ep.Path != "/metrics" {
				t.Errorf("%s: ServiceMonitor %s scrapes %q, want /metrics", o.Source, sm.Name, ep.Path)
			}
			for _, d := range []string{ep.Interval, ep.ScrapeTimeout} {
				if d != "" && !promDuration.MatchString(d) {
					t.Errorf("%s: ServiceMonitor %s: %q is not a Prometheus duration", o.Source, sm.Name, d)
				}
			}
			matched := 0
			for _, so := range r.byKind("Service") {
				s := so.Obj.(*corev1.Service)
				if s.Namespace != sm.Namespace || !sel.Matches(labels.Set(s.Labels)) {
					continue
				}
				if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					continue
				}
				matched++
			}
			if matched != 1 {
				t.Errorf("%s: ServiceMonitor %s: %d Services have port %s, want 1 (each pod scraped once)", o.Source, sm.Name, matched, ep.Port)
			}
		}
	}
}

// checkRBAC: bindings refer to rendered roles and ServiceAccounts.
func checkRBAC(t *testing.T, r *rendered) {
	t.Helper()
	subjectsExist := func(o *object, subjects []rbacv1.Subject) {
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind || r.get("ServiceAccount", s.Namespace, s.Name) == nil {
				t.Errorf("%s: %s binds %s %s/%s, which is not a rendered ServiceAccount", o.Source, o.key(), s.Kind, s.Namespace, s.Name)
			}
		}
	}
	for _, o := range r.byKind("RoleBinding") {
		b := o.Obj.(*rbacv1.RoleBinding)
		if b.RoleRef.Kind != "Role" || r.get("Role", b.Namespace, b.RoleRef.Name) == nil {
			t.Errorf("%s: RoleBinding %s refers to %s %s, which is not rendered in %s", o.Source, b.Name, b.RoleRef.Kind, b.RoleRef.Name, b.Namespace)
		}
		subjectsExist(o, b.Subjects)
	}
	for _, o := range r.byKind("ClusterRoleBinding") {
		b := o.Obj.(*rbacv1.ClusterRoleBinding)
		if b.RoleRef.Kind != "ClusterRole" || r.get("ClusterRole", "", b.RoleRef.Name) == nil {
			t.Errorf("%s: ClusterRoleBinding %s refers to %s %s, which is not rendered", o.Source, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		subjectsExist(o, b.Subjects)
	}
}

// rulesAllow reports whether rules grant verb on resource of group.
func rulesAllow(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, rule := range rules {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
			return true
		}
	}
	return false
}

// container returns a service's Deployment's container.
func container(t *testing.T, r *rendered, service string) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	o := r.get("Deployment", namespace, release+"-"+service)
	if o == nil {
		t.Fatalf("no Deployment %s-%s in the render of %v", release, service, r.args)
	}
	d := o.Obj.(*appsv1.Deployment)
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == service {
			return d, c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, service)
	return nil, nil
}

// argValue returns the value of --name in args, and whether it is there.
func argValue(args []string, name string) (string, bool) {
	for _, a := range args {
		n, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if n == name {
			return v, true
		}
	}
	return "", false
}

// envVar returns the container's variable name, or nil.
func envVar(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func describe(v any) string { return fmt.Sprintf("%+v", v) }
