package chartcheck

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// checkCollectorFollowsPool: the collector follows the InferencePool pool
// of namespace ns (--inference-pool), mounts a token, and its Role there
// reads pods and inferencepools.
func checkCollectorFollowsPool(t *testing.T, r *rendered, pool, ns string) {
	t.Helper()
	d, c := container(t, r, "collector")
	for flag, want := range map[string]string{"discovery": "kubernetes", "discovery-namespace": ns, "inference-pool": pool, "pool": pool} {
		if v, _ := argValue(c.Args, flag); v != want {
			t.Errorf("collector --%s=%q, want %q", flag, v, want)
		}
	}
	for _, flag := range []string{"discovery-selector", "discovery-target-port"} {
		if v, ok := argValue(c.Args, flag); ok {
			t.Errorf("collector --%s=%q besides --inference-pool", flag, v)
		}
	}
	if !*d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Error("collector with discovery mounts no service account token")
	}
	role := r.get("Role", ns, release+"-collector-discovery")
	if role == nil {
		t.Fatalf("no discovery Role in namespace %s", ns)
	}
	rules := role.Obj.(*rbacv1.Role).Rules
	for _, verb := range []string{"get", "list", "watch"} {
		if !rulesAllow(rules, "", "pods", verb) {
			t.Errorf("discovery Role does not allow %s pods", verb)
		}
		if !rulesAllow(rules, "inference.networking.k8s.io", "inferencepools", verb) {
			t.Errorf("discovery Role does not allow %s inferencepools", verb)
		}
	}
	if rulesAllow(rules, "inference.networking.k8s.io", "inferencepools", "update") {
		t.Error("discovery Role allows writing inferencepools")
	}
}

// checkFullInferencePool: the full values' InferencePool selects the
// model servers on both target ports and names the picker's ext_proc
// Service (rendered, serving the port); the HTTPRoute sends the Gateway's
// traffic to it.
func checkFullInferencePool(t *testing.T, r *rendered) {
	t.Helper()
	o := r.get("InferencePool", namespace, "llama-pool")
	if o == nil {
		t.Fatal("no InferencePool llama-pool")
	}
	p := o.Obj.(*inferencePool)
	if got := p.Spec.Selector.MatchLabels; len(got) != 2 || got["app.kubernetes.io/name"] != "vllm" || got["llm-d.ai/role"] != "decode" {
		t.Errorf("selector %v", got)
	}
	if tp := p.Spec.TargetPorts; len(tp) != 2 || tp[0].Number != 8000 || tp[1].Number != 8001 {
		t.Errorf("targetPorts %v", tp)
	}
	if p.Spec.AppProtocol != "http" || p.Labels["example.com/tier"] != "inference" || p.Annotations["example.com/owner"] != "inference" {
		t.Errorf("appProtocol %q, labels %v, annotations %v", p.Spec.AppProtocol, p.Labels, p.Annotations)
	}
	ref := p.Spec.EndpointPickerRef
	if ref == nil || ref.Kind != "Service" || ref.Name != release+"-picker" || ref.Port == nil || ref.Port.Number != 9002 || ref.FailureMode != "FailOpen" {
		t.Fatalf("endpointPickerRef %+v", ref)
	}
	checkPickerService(t, r, namespace, ref.Name, ref.Port.Number)

	ro := r.get("HTTPRoute", namespace, "llama-route")
	if ro == nil {
		t.Fatal("no HTTPRoute llama-route in the InferencePool's namespace")
	}
	hr := ro.Obj.(*httpRoute)
	if pr := hr.Spec.ParentRefs; len(pr) != 1 || pr[0].Kind != "Gateway" || pr[0].Group != "gateway.networking.k8s.io" ||
		pr[0].Name != "inference-gateway" || pr[0].Namespace != "gateway-system" || pr[0].SectionName != "http" {
		t.Errorf("parentRefs %+v", pr)
	}
	if !slices.Equal(hr.Spec.Hostnames, []string{"llm.example.com"}) || len(hr.Spec.Rules) != 1 {
		t.Fatalf("hostnames %v, %d rules", hr.Spec.Hostnames, len(hr.Spec.Rules))
	}
	rule := hr.Spec.Rules[0]
	if len(rule.Matches) != 1 || rule.Matches[0].Path.Type != "PathPrefix" || rule.Matches[0].Path.Value != "/v1" {
		t.Errorf("matches %+v", rule.Matches)
	}
	if b := rule.BackendRefs; len(b) != 1 || b[0].Group != "inference.networking.k8s.io" || b[0].Kind != "InferencePool" || b[0].Name != "llama-pool" {
		t.Errorf("backendRefs %+v, want the InferencePool llama-pool", b)
	}
	if rule.Timeouts == nil || rule.Timeouts.Request != "300s" {
		t.Errorf("timeouts %+v", rule.Timeouts)
	}
}

// checkPickerService: the Service name of namespace ns is the picker's
// and serves port.
func checkPickerService(t *testing.T, r *rendered, ns, name string, port int32) {
	t.Helper()
	so := r.get("Service", ns, name)
	if so == nil {
		t.Fatalf("the endpointPickerRef's Service %s/%s is not rendered", ns, name)
	}
	svc := so.Obj.(*corev1.Service)
	if so.component() != "picker" || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port }) {
		t.Errorf("Service %s: component %q, ports %v; want the picker's, with %d", name, so.component(), svc.Spec.Ports, port)
	}
}

// checkVariantsOfTheAPI: the autoscaler reads the VariantAutoscaling
// objects of namespace ns from the API (--va-source source) and may write
// their status there.
func checkVariantsOfTheAPI(t *testing.T, r *rendered, source, ns, selector string) {
	t.Helper()
	d, c := container(t, r, "autoscaler")
	want := map[string]string{"va-source": source, "va-namespace": ns}
	if selector != "" {
		want["va-selector"] = selector
	}
	for flag, w := range want {
		if v, _ := argValue(c.Args, flag); v != w {
			t.Errorf("autoscaler --%s=%q, want %q", flag, v, w)
		}
	}
	if !*d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Error("autoscaler reading the API mounts no service account token")
	}
	o := r.get("Role", ns, release+"-autoscaler-variants")
	if o == nil {
		t.Fatalf("no Role %s-autoscaler-variants in %s", release, ns)
	}
	checkVariantRules(t, o.Obj.(*rbacv1.Role).Rules)
}

func checkVariantRules(t *testing.T, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, verb := range []string{"get", "list", "watch"} {
		if !rulesAllow(rules, "llmd.ai", "variantautoscalings", verb) {
			t.Errorf("autoscaler RBAC does not allow %s variantautoscalings", verb)
		}
	}
	for _, verb := range []string{"update", "patch"} {
		if !rulesAllow(rules, "llmd.ai", "variantautoscalings/status", verb) {
			t.Errorf("autoscaler RBAC does not allow %s variantautoscalings/status", verb)
		}
		if rulesAllow(rules, "llmd.ai", "variantautoscalings", verb) {
			t.Errorf("autoscaler RBAC allows %s on the variantautoscalings themselves (only their status is written)", verb)
		}
	}
}

// TestInferencePoolOffByDefault: no InferencePool, HTTPRoute or RBAC for
// them by default; the collector discovers nothing and the autoscaler
// reads etcd.
func TestInferencePoolOffByDefault(t *testing.T) {
	t.Parallel()
	r := render(t)
	for _, kind := range []string{"InferencePool", "HTTPRoute"} {
		if objs := r.byKind(kind); len(objs) > 0 {
			t.Errorf("default values render %s", objs[0].key())
		}
	}
	_, c := container(t, r, "collector")
	if v, ok := argValue(c.Args, "inference-pool"); ok {
		t.Errorf("collector --inference-pool=%s by default", v)
	}
	_, a := container(t, r, "autoscaler")
	if v, ok := argValue(a.Args, "va-source"); ok {
		t.Errorf("autoscaler --va-source=%s by default (etcd is the flag's default)", v)
	}
}

// TestInferencePoolMinimal: the pool from a selector alone, with the
// defaults (port 8000, the release's picker on 9002, FailClose); the
// collector follows it in the release's namespace.
func TestInferencePoolMinimal(t *testing.T) {
	t.Parallel()
	r := render(t, "--set", "global.inferencePool.create=true", "--set", "global.inferencePool.selector.app=vllm")
	check(t, r)
	o := r.get("InferencePool", namespace, "default")
	if o == nil {
		t.Fatal("no InferencePool default")
	}
	p := o.Obj.(*inferencePool)
	ref := p.Spec.EndpointPickerRef
	if len(p.Spec.TargetPorts) != 1 || p.Spec.TargetPorts[0].Number != 8000 || p.Spec.AppProtocol != "" ||
		ref == nil || ref.Name != release+"-picker" || ref.Port.Number != 9002 || ref.FailureMode != "FailClose" {
		t.Fatalf("spec %+v, endpointPickerRef %+v", p.Spec, ref)
	}
	checkPickerService(t, r, namespace, ref.Name, 9002)
	checkCollectorFollowsPool(t, r, "default", namespace)
	if len(r.byKind("HTTPRoute")) != 0 {
		t.Error("an HTTPRoute without httpRoute.enabled")
	}
}

// TestCollectorSelectorDiscovery: without an InferencePool, the label
// selector and target port of discovery.kubernetes, and a Role on pods
// only.
func TestCollectorSelectorDiscovery(t *testing.T) {
	t.Parallel()
	r := render(t, "--set", "collector.discovery.kubernetes.enabled=true", "--set", "collector.discovery.kubernetes.namespace=models",
		"--set", "collector.discovery.kubernetes.selector=app.kubernetes.io/name=vllm", "--set", "collector.discovery.kubernetes.targetPort=8001")
	check(t, r)
	_, c := container(t, r, "collector")
	for flag, want := range map[string]string{"discovery": "kubernetes", "discovery-namespace": "models", "discovery-selector": "app.kubernetes.io/name=vllm", "discovery-target-port": "8001"} {
		if v, _ := argValue(c.Args, flag); v != want {
			t.Errorf("collector --%s=%q, want %q", flag, v, want)
		}
	}
	if v, ok := argValue(c.Args, "inference-pool"); ok {
		t.Errorf("collector --inference-pool=%s in selector mode", v)
	}
	role := r.get("Role", "models", release+"-collector-discovery")
	if role == nil {
		t.Fatal("no discovery Role in namespace models")
	}
	rules := role.Obj.(*rbacv1.Role).Rules
	if !rulesAllow(rules, "", "pods", "watch") || rulesAllow(rules, "inference.networking.k8s.io", "inferencepools", "get") {
		t.Errorf("selector-mode discovery Role rules %v", rules)
	}
	// rbac.create false: no Role, the discovery stays.
	r = render(t, "--set", "collector.discovery.kubernetes.enabled=true", "--set", "collector.discovery.kubernetes.selector=app=vllm",
		"--set", "collector.discovery.kubernetes.rbac.create=false")
	if n := len(r.byKind("Role")); n != 0 {
		t.Errorf("%d Roles with collector.discovery.kubernetes.rbac.create=false", n)
	}
}

// TestCollectorFollowsExistingPool: discovery.kubernetes.inferencePool
// follows an InferencePool made elsewhere (none rendered), in
// discovery.kubernetes.namespace.
func TestCollectorFollowsExistingPool(t *testing.T) {
	t.Parallel()
	r := render(t, "--set", "collector.discovery.kubernetes.inferencePool=true", "--set", "collector.discovery.kubernetes.namespace=models")
	check(t, r)
	checkCollectorFollowsPool(t, r, "default", "models")
	if len(r.byKind("InferencePool")) != 0 {
		t.Error("an InferencePool rendered without global.inferencePool.create")
	}
}

// TestAutoscalerVariantsEveryNamespace: --va-namespace=* with a
// ClusterRole.
func TestAutoscalerVariantsEveryNamespace(t *testing.T) {
	t.Parallel()
	r := render(t, "--set", "autoscaler.variantAutoscalings.source=kubernetes", "--set", "autoscaler.variantAutoscalings.namespace=*",
		"--set", "autoscaler.rbac.scope=cluster")
	check(t, r)
	_, c := container(t, r, "autoscaler")
	if v, _ := argValue(c.Args, "va-namespace"); v != "*" {
		t.Errorf("--va-namespace=%q", v)
	}
	roles := r.byKind("ClusterRole")
	if len(roles) != 1 || !strings.HasSuffix(roles[0].Meta.GetName(), "autoscaler-variants") {
		t.Fatalf("ClusterRoles %v", roles)
	}
	checkVariantRules(t, roles[0].Obj.(*rbacv1.ClusterRole).Rules)
}

// TestInferencePoolRefusals: values that cannot make a working pool or
// route fail the render, naming the value.
func TestInferencePoolRefusals(t *testing.T) {
	t.Parallel()
	repo := needRepo(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no selector", []string{"--set", "global.inferencePool.create=true"}, "global.inferencePool.selector"},
		{"another namespace, the release's picker", []string{"--set", "global.inferencePool.create=true", "--set", "global.inferencePool.selector.app=vllm",
			"--set", "global.inferencePool.namespace=models"}, "global.inferencePool.endpointPicker.service"},
		{"no picker", []string{"--set", "global.inferencePool.create=true", "--set", "global.inferencePool.selector.app=vllm",
			"--set", "picker.enabled=false"}, "global.inferencePool.endpointPicker.service"},
		{"a failure mode", []string{"--set", "global.inferencePool.endpointPicker.failureMode=Open"}, "/global/inferencePool/endpointPicker/failureMode"},
		{"nine target ports", []string{"--set", "global.inferencePool.targetPorts={1,2,3,4,5,6,7,8,9}"}, "targetPorts"},
		{"a route without a Gateway", []string{"--set", "httpRoute.enabled=true"}, "httpRoute.parentRefs"},
		{"every namespace without a ClusterRole", []string{"--set", "autoscaler.variantAutoscalings.source=kubernetes",
			"--set", "autoscaler.variantAutoscalings.namespace=*"}, "autoscaler.rbac.scope cluster"},
		{"an unknown source", []string{"--set", "autoscaler.variantAutoscalings.source=crd"}, "variantAutoscalings/source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := repo.template(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template %v: %v; want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
}
