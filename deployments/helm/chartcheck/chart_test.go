package chartcheck

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// fullValues is the values file that turns every option on.
const fullValues = "deployments/helm/hermod/ci/values-full.yaml"

func fullArgs(t *testing.T) []string {
	return []string{"-f", needRepo(t).path(fullValues)}
}

// TestLint: helm lint --strict of the umbrella chart (and so of every
// subchart's templates, which render only through it: they take their
// named templates from the hermod-common library and their shared values
// from global) with the default and the full values.
func TestLint(t *testing.T) {
	r := needRepo(t)
	for name, args := range map[string][]string{"default": nil, "full": fullArgs(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := r.runHelm(append([]string{"lint", "--strict", r.chart}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(out, []byte("0 chart(s) failed")) {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// TestDefaultValues: the defaults render every service with one Deployment,
// Service, ServiceAccount and PodDisruptionBudget, and nothing optional:
// no ServiceMonitor, HPA, RBAC, token, config or dashboard.
func TestDefaultValues(t *testing.T) {
	t.Parallel()
	r := render(t)
	check(t, r)
	for _, svc := range services {
		name := release + "-" + svc
		for _, kind := range []string{"Deployment", "Service", "ServiceAccount", "PodDisruptionBudget"} {
			if r.get(kind, namespace, name) == nil {
				t.Errorf("no %s %s", kind, name)
			}
		}
		d, _ := container(t, r, svc)
		if *d.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Errorf("%s mounts a service account token by default", svc)
		}
	}
	for _, kind := range []string{"ServiceMonitor", "HorizontalPodAutoscaler", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Secret"} {
		for _, o := range r.byKind(kind) {
			t.Errorf("default values render %s (%s)", o.key(), o.Source)
		}
	}
	_, picker := container(t, r, "picker")
	if _, ok := argValue(picker.Args, "config"); ok {
		t.Error("picker has --config without picker.endpointPickerConfig (it should read etcd)")
	}
	_, autoscaler := container(t, r, "autoscaler")
	if v, _ := argValue(autoscaler.Args, "actuator"); v != "metrics" {
		t.Errorf("autoscaler --actuator=%s by default, want metrics (no RBAC)", v)
	}
}

// TestFullValues: everything on renders, strictly valid, with the pieces it
// asked for.
func TestFullValues(t *testing.T) {
	t.Parallel()
	repo := needRepo(t)
	r := render(t, fullArgs(t)...)
	check(t, r)

	var values map[string]any
	data, err := os.ReadFile(repo.path(fullValues))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}

	for _, svc := range services {
		if r.get("ServiceMonitor", namespace, release+"-"+svc) == nil {
			t.Errorf("no ServiceMonitor for %s", svc)
		}
		if r.get("PodDisruptionBudget", namespace, release+"-"+svc) == nil {
			t.Errorf("no PodDisruptionBudget for %s", svc)
		}
	}
	for _, svc := range []string{"gateway", "picker"} {
		if r.get("HorizontalPodAutoscaler", namespace, release+"-"+svc) == nil {
			t.Errorf("no HorizontalPodAutoscaler for %s", svc)
		}
	}

	t.Run("stores by secret reference", func(t *testing.T) {
		// NATS: a URL without credentials, the user's password a mounted
		// file (the URL-from-a-Secret way is TestVariants')
		for _, svc := range []string{"gateway", "picker", "indexer", "collector", "autoscaler"} {
			_, c := container(t, r, svc)
			if v, _ := argValue(c.Args, "nats-url"); v != "tls://nats.infra.svc:4222" {
				t.Errorf("%s: --nats-url=%q", svc, v)
			}
			if e := envVar(c, "HERMOD_NATS_URL"); e != nil {
				t.Errorf("%s: HERMOD_NATS_URL besides --nats-url: %s", svc, describe(e))
			}
		}
		_, picker := container(t, r, "picker")
		if e := envVar(picker, "HERMOD_INFLIGHT_VALKEY_ADDRESS"); e == nil || e.Value != "rediss://hermod:$(SECRET_VALKEY_PASSWORD)@valkey.infra.svc:6379/1" {
			t.Errorf("picker: HERMOD_INFLIGHT_VALKEY_ADDRESS = %s", describe(e))
		}
		_, indexer := container(t, r, "indexer")
		if e := envVar(indexer, "HERMOD_INDEX_CONFIG"); e == nil || !strings.Contains(e.Value, `"valkeyConfig"`) {
			t.Errorf("indexer: HERMOD_INDEX_CONFIG = %s", describe(e))
		}
		_, responses := container(t, r, "responses")
		e := envVar(responses, "HERMOD_STORE_CONFIG")
		if e == nil {
			t.Fatal("responses: no HERMOD_STORE_CONFIG")
		}
		var store struct {
			TieredConfig struct {
				Redis map[string]any `json:"redis"`
				Mongo map[string]any `json:"mongo"`
			} `json:"tieredConfig"`
		}
		if err := json.Unmarshal([]byte(e.Value), &store); err != nil {
			t.Fatalf("responses: HERMOD_STORE_CONFIG is not JSON: %v", err)
		}
		if store.TieredConfig.Redis["passwordFile"] != "/etc/hermod/secrets/valkey/password" || store.TieredConfig.Redis["password"] != nil ||
			store.TieredConfig.Mongo["uri"] != "$(SECRET_MONGODB_URI)" || store.TieredConfig.Mongo["passwordFile"] != "/etc/hermod/secrets/mongodb/password" {
			t.Errorf("responses: store config does not take its secrets by reference: %s", e.Value)
		}
		// the variables a $(NAME) refers to come first (the kubelet expands only those)
		for _, c := range []*corev1.Container{picker, indexer, responses} {
			defined := map[string]bool{}
			for _, e := range c.Env {
				for _, ref := range []string{"SECRET_VALKEY_PASSWORD", "SECRET_MONGODB_URI"} {
					if strings.Contains(e.Value, "$("+ref+")") && !defined[ref] {
						t.Errorf("%s: %s refers to $(%s) before it is defined", c.Name, e.Name, ref)
					}
				}
				defined[e.Name] = true
			}
		}
	})

	t.Run("collector discovery", func(t *testing.T) {
		// the chart's InferencePool wins over discovery.kubernetes.selector
		// (TestCollectorSelectorDiscovery renders that)
		checkCollectorFollowsPool(t, r, "llama-pool", namespace)
	})

	t.Run("inference pool and route", func(t *testing.T) { checkFullInferencePool(t, r) })

	t.Run("autoscaler variants of the API", func(t *testing.T) {
		checkVariantsOfTheAPI(t, r, "both", "models", "hermod.io/pool=llama-pool")
	})

	t.Run("collector endpoints file", func(t *testing.T) { checkEndpointsFile(t, r) })

	t.Run("autoscaler kubernetes actuator", func(t *testing.T) {
		d, c := container(t, r, "autoscaler")
		if v, _ := argValue(c.Args, "actuator"); v != "kubernetes" {
			t.Errorf("autoscaler --actuator=%s", v)
		}
		if !*d.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Error("autoscaler with the kubernetes actuator mounts no service account token")
		}
		for _, ns := range []string{"models", "models-canary"} {
			o := r.get("Role", ns, release+"-autoscaler-scaler")
			if o == nil {
				t.Errorf("no autoscaler Role in %s", ns)
				continue
			}
			checkScalerRules(t, o.Obj.(*rbacv1.Role).Rules)
		}
		if v, _ := argValue(c.Args, "config"); v == "" {
			t.Error("autoscaler has no --config")
		}
	})

	t.Run("dashboards", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(repo.chart, "dashboards", "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no dashboards/*.json (%v)", err)
		}
		for _, f := range files {
			base := strings.TrimSuffix(filepath.Base(f), ".json")
			o := r.get("ConfigMap", "monitoring", release+"-dashboard-"+base)
			if o == nil {
				t.Errorf("no dashboard ConfigMap for %s", f)
				continue
			}
			cm := o.Obj.(*corev1.ConfigMap)
			if cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("%s: labels %v, want grafana_dashboard=1", cm.Name, cm.Labels)
			}
			want, _ := os.ReadFile(f)
			if got := cm.Data[filepath.Base(f)]; got != string(want) || !json.Valid([]byte(got)) {
				t.Errorf("%s: data[%s] is not the dashboard file", cm.Name, filepath.Base(f))
			}
		}
	})

	t.Run("picker config", func(t *testing.T) {
		want := values["picker"].(map[string]any)["endpointPickerConfig"]
		checkPickerConfig(t, r, func(got string) {
			var v any
			if err := yaml.Unmarshal([]byte(got), &v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, want) {
				t.Errorf("picker ConfigMap holds\n%s\nwant the values' endpointPickerConfig %v", got, want)
			}
		})
	})
}

func checkScalerRules(t *testing.T, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, res := range []struct{ group, resource string }{{"apps", "deployments"}, {"apps", "statefulsets"}, {"leaderworkerset.x-k8s.io", "leaderworkersets"}} {
		for _, verb := range []string{"get", "update"} {
			if !rulesAllow(rules, res.group, res.resource+"/scale", verb) {
				t.Errorf("autoscaler RBAC does not allow %s %s/scale (%s)", verb, res.resource, res.group)
			}
		}
		if !rulesAllow(rules, res.group, res.resource, "get") {
			t.Errorf("autoscaler RBAC does not allow get %s (%s)", res.resource, res.group)
		}
	}
}

// checkPickerConfig finds the picker's --config file in its ConfigMap and
// hands its text to compare.
func checkPickerConfig(t *testing.T, r *rendered, compare func(string)) {
	t.Helper()
	d, c := container(t, r, "picker")
	path, ok := argValue(c.Args, "config")
	if !ok {
		t.Fatal("picker has no --config")
	}
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) != filepath.Clean(m.MountPath) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			o := r.get("ConfigMap", namespace, v.ConfigMap.Name)
			if o == nil {
				t.Fatalf("ConfigMap %s is not rendered", v.ConfigMap.Name)
			}
			text, ok := o.Obj.(*corev1.ConfigMap).Data[filepath.Base(path)]
			if !ok {
				t.Fatalf("ConfigMap %s has no %s", v.ConfigMap.Name, filepath.Base(path))
			}
			compare(text)
			return
		}
	}
	t.Fatalf("--config=%s is on no ConfigMap volume", path)
}

// TestPickerConfigAsIs: a Heimdall EndpointPickerConfig reaches the picker
// unchanged, given as a string (byte for byte) or as a Heimdall values
// file's config: block pasted under picker.endpointPickerConfig.
func TestPickerConfigAsIs(t *testing.T) {
	repo := needRepo(t)
	reference := repo.path("libs", "plugins", "standard", "testdata", "reference")

	t.Run("string", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(reference, "003-pd-context-length.yaml")
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		r := render(t, "--set-file", "picker.endpointPickerConfig="+file)
		check(t, r)
		checkPickerConfig(t, r, func(got string) {
			if got != string(want) {
				t.Errorf("picker ConfigMap holds\n%q\nwant the file byte for byte\n%q", got, want)
			}
		})
	})

	t.Run("heimdall values pasted", func(t *testing.T) {
		t.Parallel()
		heimdall, err := os.ReadFile(filepath.Join(reference, "000-load-aware-values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var wrapped struct {
			Config any `json:"config"`
		}
		if err := yaml.Unmarshal(heimdall, &wrapped); err != nil || wrapped.Config == nil {
			t.Fatalf("the Heimdall values file has no config: (%v)", err)
		}
		// the whole values file, config: key and comments included, pasted
		// under picker.endpointPickerConfig
		var b strings.Builder
		b.WriteString("picker:\n  endpointPickerConfig:\n")
		for line := range strings.SplitSeq(strings.TrimRight(string(heimdall), "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := repo.template("-f", values)
		if err != nil {
			t.Fatal(err)
		}
		check(t, r)
		checkPickerConfig(t, r, func(got string) {
			var v any
			if err := yaml.Unmarshal([]byte(got), &v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, wrapped.Config) {
				t.Errorf("picker ConfigMap holds\n%s\nwant the Heimdall config: block %v", got, wrapped.Config)
			}
		})
	})
}

// TestDisableEach: <service>.enabled=false renders none of that service's
// objects and exactly the other objects of the default render.
func TestDisableEach(t *testing.T) {
	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			t.Parallel()
			all := render(t)
			r := render(t, "--set", svc+".enabled=false")
			check(t, r)
			want := map[string]bool{}
			for _, o := range all.objects {
				if o.component() != svc {
					want[o.key()] = true
				}
			}
			for _, o := range r.objects {
				if o.component() == svc || strings.Contains(o.Meta.GetName(), "-"+svc) {
					t.Errorf("%s.enabled=false still renders %s (%s)", svc, o.key(), o.Source)
				}
			}
			if got := r.keys(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s.enabled=false renders\n%v\nwant the others' objects\n%v", svc, sortedKeys(got), sortedKeys(want))
			}
			// the others no longer point at it
			for _, other := range services {
				if other == svc {
					continue
				}
				_, c := container(t, r, other)
				for _, a := range c.Args {
					if strings.Contains(a, release+"-"+svc+".") {
						t.Errorf("%s still addresses the disabled %s: %s", other, svc, a)
					}
				}
			}
		})
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestScaleEach: <service>.replicas=N sets that Deployment's replicas and
// changes nothing else: one render gives each service a different count.
func TestScaleEach(t *testing.T) {
	t.Parallel()
	base := render(t)
	var args []string
	want := map[string]int32{}
	for i, svc := range services {
		want[svc] = int32(3 + i)
		args = append(args, "--set", svc+".replicas="+strconv.Itoa(3+i))
	}
	r := render(t, args...)
	check(t, r)
	if !reflect.DeepEqual(r.keys(), base.keys()) {
		t.Errorf("scaling changed the set of objects:\n%v\nwant\n%v", sortedKeys(r.keys()), sortedKeys(base.keys()))
	}
	for _, o := range r.objects {
		b := base.get(o.GVK.Kind, o.Meta.GetNamespace(), o.Meta.GetName())
		if b == nil {
			continue
		}
		if o.GVK.Kind != "Deployment" {
			if !bytes.Equal(o.Raw, b.Raw) {
				t.Errorf("scaling changed %s", o.key())
			}
			continue
		}
		d, bd := o.Obj.(*appsv1.Deployment).DeepCopy(), b.Obj.(*appsv1.Deployment).DeepCopy()
		svc := o.component()
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want[svc] {
			t.Errorf("%s: replicas %v, want %d", d.Name, d.Spec.Replicas, want[svc])
		}
		d.Spec.Replicas, bd.Spec.Replicas = nil, nil
		if !reflect.DeepEqual(d, bd) {
			t.Errorf("%s: scaling changed more than replicas", d.Name)
		}
	}
}

// TestAutoscalerClusterRBAC: rbac.scope=cluster grants the kubernetes
// actuator's rules through a ClusterRole bound to the autoscaler's
// ServiceAccount.
func TestAutoscalerClusterRBAC(t *testing.T) {
	t.Parallel()
	r := render(t, "--set", "autoscaler.actuator=kubernetes", "--set", "autoscaler.rbac.scope=cluster")
	check(t, r)
	roles := r.byKind("ClusterRole")
	bindings := r.byKind("ClusterRoleBinding")
	if len(roles) != 1 || len(bindings) != 1 || len(r.byKind("Role")) != 0 {
		t.Fatalf("%d ClusterRoles, %d ClusterRoleBindings, %d Roles; want 1, 1, 0", len(roles), len(bindings), len(r.byKind("Role")))
	}
	checkScalerRules(t, roles[0].Obj.(*rbacv1.ClusterRole).Rules)
	b := bindings[0].Obj.(*rbacv1.ClusterRoleBinding)
	if len(b.Subjects) != 1 || b.Subjects[0].Name != release+"-autoscaler" || b.Subjects[0].Namespace != namespace {
		t.Errorf("ClusterRoleBinding subjects %v", b.Subjects)
	}
	if _, c := container(t, r, "autoscaler"); !slices.Contains(c.Args, "--actuator=kubernetes") {
		t.Errorf("autoscaler args %v", c.Args)
	}
}

// TestValuesSchema: values.schema.json refuses a misspelt key and a value
// of the wrong type, instead of the chart ignoring them.
func TestValuesSchema(t *testing.T) {
	t.Parallel()
	repo := needRepo(t)
	_, err := repo.template("--set", "gateway.replica=3", "--set-string", "picker.replicas=2", "--set", "responses.store.type=disk")
	if err == nil {
		t.Fatal("helm template accepted gateway.replica, picker.replicas=\"2\" and responses.store.type=disk")
	}
	for _, want := range []string{"'replica' not allowed", "/picker/replicas", "/responses/store/type"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("schema error does not mention %q:\n%v", want, err)
		}
	}
}

// TestVariants: the alternatives the full values do not take
// (testdata/values-variants.yaml): a name override, addresses from the
// values, configs given as strings, gRPC probes, the responses store from
// a Secret, an inline index config, an existing ServiceAccount, the NATS
// URL from a Secret.
func TestVariants(t *testing.T) {
	t.Parallel()
	repo := needRepo(t)
	r := render(t, "-f", repo.path("deployments", "helm", "chartcheck", "testdata", "values-variants.yaml"))
	check(t, r)
	name := func(svc string) string { return "llm-router-" + svc }
	get := func(svc string) (*appsv1.Deployment, *corev1.Container) {
		t.Helper()
		o := r.get("Deployment", namespace, name(svc))
		if o == nil {
			t.Fatalf("no Deployment %s", name(svc))
		}
		d := o.Obj.(*appsv1.Deployment)
		return d, &d.Spec.Template.Spec.Containers[0]
	}

	_, gw := get("gateway")
	// the older NATS way: the whole URL, credentials included, from a Secret
	if e := envVar(gw, "HERMOD_NATS_URL"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "nats-url" || e.ValueFrom.SecretKeyRef.Key != "nats-url" {
		t.Errorf("gateway: HERMOD_NATS_URL is not from Secret nats-url: %s", describe(e))
	}
	if _, ok := argValue(gw.Args, "nats-url"); ok {
		t.Error("gateway: --nats-url given besides the Secret")
	}
	for flag, want := range map[string]string{"picker-addrs": "picker-a.example:9002,picker-b.example:9002", "responses-address": "responses.elsewhere:9097", "etcd-endpoints": "etcd-a:2379,etcd-b:2379", "pool": "other-pool"} {
		if v, _ := argValue(gw.Args, flag); v != want {
			t.Errorf("gateway --%s=%q, want %q", flag, v, want)
		}
	}
	flow := r.get("ConfigMap", namespace, name("gateway")+"-flow-control")
	if flow == nil || flow.Obj.(*corev1.ConfigMap).Data["flow-control.yaml"] != "# a string is kept as it is\nqueueing: false\nmaxConcurrency: 64\n" {
		t.Errorf("flow-control ConfigMap: %v", flow)
	}

	_, picker := get("picker")
	if p := picker.ReadinessProbe; p == nil || p.GRPC == nil || p.GRPC.Port != 9002 {
		t.Errorf("picker readiness probe %v, want gRPC on 9002", p)
	}
	if r.get("Service", namespace, name("picker")+"-headless") != nil {
		t.Error("picker headless Service rendered with service.headless false")
	}

	_, indexer := get("indexer")
	if v, _ := argValue(indexer.Args, "index-config"); v != `{"costAwareMemoryConfig":{"size":"2GiB"}}` {
		t.Errorf("indexer --index-config=%s", v)
	}
	if _, ok := argValue(indexer.Args, "zmq-bind"); ok {
		t.Error("indexer binds ZMQ with zmq.enabled false")
	}

	d, responses := get("responses")
	if v, _ := argValue(responses.Args, "store-config"); v != "@/etc/hermod/responses/store/store.yaml" {
		t.Errorf("responses --store-config=%s", v)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "responses-store"
	}) {
		t.Error("responses does not mount the store Secret")
	}
	if _, ok := argValue(responses.Args, "etcd-endpoints"); ok {
		t.Error("responses gets etcd although its store config is given")
	}

	d, _ = get("autoscaler")
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "existing-sa" || r.get("ServiceAccount", namespace, name("autoscaler")) != nil {
		t.Errorf("autoscaler runs as %q with serviceAccount.create false and name existing-sa", sa)
	}
	if r.get("Deployment", namespace, name("collector")) != nil {
		t.Error("collector rendered while disabled")
	}
}

// checkEndpointsFile checks the collector's endpoints file of the full
// values.
func checkEndpointsFile(t *testing.T, r *rendered) {
	t.Helper()
	d, c := container(t, r, "collector")
	if v, _ := argValue(c.Args, "endpoints-file"); v != "/etc/hermod/collector/endpoints/endpoints.yaml" {
		t.Errorf("collector --endpoints-file=%q", v)
	}
	cm := r.get("ConfigMap", namespace, release+"-collector-endpoints")
	if cm == nil || !strings.Contains(cm.Obj.(*corev1.ConfigMap).Data["endpoints.yaml"], "name: vm-a100-1") {
		t.Fatalf("endpoints ConfigMap: %v", cm)
	}
	// Mounted as a directory (a subPath mount never sees an update) and
	// without a checksum annotation (an edit is reloaded, not rolled out).
	for _, m := range c.VolumeMounts {
		if m.Name == "endpoints" && (m.MountPath != "/etc/hermod/collector/endpoints" || m.SubPath != "") {
			t.Errorf("endpoints mount %+v", m)
		}
	}
	for k := range d.Spec.Template.Annotations {
		if strings.Contains(k, "endpoints") {
			t.Errorf("collector pod annotation %s rolls the pods on an edit of the endpoints file", k)
		}
	}
}
