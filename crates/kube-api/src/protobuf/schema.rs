//! The protobuf messages the server decodes: field numbers, JSON names and types.
//!
//! Stated in a small notation, one message a line, parsed once at first use:
//! `Name: <number> <jsonName> <type>; ...` where a type is `s` (string), `b` (bool), `i32`,
//! `i64`, `bytes`, `Time`, `IntOrString`, `Quantity`, `Raw` (embedded JSON), `map<V>`
//! (string keys), `[]T` (repeated), `^T` (a Go-inlined member: its fields join the parent's),
//! `-` (ignored: status on writes, which the server resets anyway), or a message name. A `!`
//! after a scalar type marks a Go pointer field, whose zero value is kept.
//!
//! The field numbers are those of Kubernetes' wire format (k8s.io/api `generated.proto`); the
//! tests check them against the `k8s-pb` crate's encoder.

use std::collections::HashMap;
use std::sync::OnceLock;

const SCHEMA: &str = r#"
ObjectMeta: 1 name s; 2 generateName s; 3 namespace s; 4 selfLink s; 5 uid s; 6 resourceVersion s; 7 generation i64; 8 creationTimestamp Time; 9 deletionTimestamp Time; 10 deletionGracePeriodSeconds i64!; 11 labels map<s>; 12 annotations map<s>; 13 ownerReferences []OwnerReference; 14 finalizers []s; 17 managedFields []ManagedFieldsEntry
OwnerReference: 1 kind s; 3 name s; 4 uid s; 5 apiVersion s; 6 controller b!; 7 blockOwnerDeletion b!
ManagedFieldsEntry: 1 manager s; 2 operation s; 3 apiVersion s; 4 time Time; 6 fieldsType s; 7 fieldsV1 Raw; 8 subresource s
LabelSelector: 1 matchLabels map<s>; 2 matchExpressions []LabelSelectorRequirement
LabelSelectorRequirement: 1 key s; 2 operator s; 3 values []s
DeleteOptions: 1 gracePeriodSeconds i64!; 2 preconditions Preconditions; 3 orphanDependents b!; 4 propagationPolicy s; 5 dryRun []s; 6 ignoreStoreReadErrorWithClusterBreakingPotential b!
Preconditions: 1 uid s; 2 resourceVersion s
ObjectReference: 1 kind s; 2 namespace s; 3 name s; 4 uid s; 5 apiVersion s; 6 resourceVersion s; 7 fieldPath s
LocalObjectReference: 1 name s
Namespace: 1 metadata ObjectMeta; 2 spec NamespaceSpec; 3 status -
NamespaceSpec: 1 finalizers []s
ConfigMap: 1 metadata ObjectMeta; 2 data map<s>; 3 binaryData map<bytes>; 4 immutable b!
Secret: 1 metadata ObjectMeta; 2 data map<bytes>; 3 type s; 4 stringData map<s>; 5 immutable b!
ServiceAccount: 1 metadata ObjectMeta; 2 secrets []ObjectReference; 3 imagePullSecrets []LocalObjectReference; 4 automountServiceAccountToken b!
Service: 1 metadata ObjectMeta; 2 spec ServiceSpec; 3 status -
ServiceSpec: 1 ports []ServicePort; 2 selector map<s>; 3 clusterIP s; 4 type s; 5 externalIPs []s; 7 sessionAffinity s; 8 loadBalancerIP s; 9 loadBalancerSourceRanges []s; 10 externalName s; 11 externalTrafficPolicy s; 12 healthCheckNodePort i32; 13 publishNotReadyAddresses b; 17 ipFamilyPolicy s; 18 clusterIPs []s; 19 ipFamilies []s; 20 allocateLoadBalancerNodePorts b!; 21 loadBalancerClass s; 22 internalTrafficPolicy s; 23 trafficDistribution s
ServicePort: 1 name s; 2 protocol s; 3 port i32; 4 targetPort IntOrString; 5 nodePort i32; 6 appProtocol s
Pod: 1 metadata ObjectMeta; 2 spec PodSpec; 3 status -
PodTemplateSpec: 1 metadata ObjectMeta; 2 spec PodSpec
PodSpec: 1 volumes []Volume; 2 containers []Container; 3 restartPolicy s; 4 terminationGracePeriodSeconds i64!; 5 activeDeadlineSeconds i64!; 6 dnsPolicy s; 7 nodeSelector map<s>; 8 serviceAccountName s; 9 serviceAccount s; 10 nodeName s; 11 hostNetwork b; 12 hostPID b; 13 hostIPC b; 14 securityContext PodSecurityContext; 15 imagePullSecrets []LocalObjectReference; 16 hostname s; 17 subdomain s; 19 schedulerName s; 20 initContainers []Container; 21 automountServiceAccountToken b!; 22 tolerations []Toleration; 24 priorityClassName s; 25 priority i32!; 27 shareProcessNamespace b!; 29 runtimeClassName s; 30 enableServiceLinks b!; 31 preemptionPolicy s; 35 setHostnameAsFQDN b!; 37 hostUsers b!
Container: 1 name s; 2 image s; 3 command []s; 4 args []s; 5 workingDir s; 6 ports []ContainerPort; 7 env []EnvVar; 8 resources ResourceRequirements; 9 volumeMounts []VolumeMount; 13 terminationMessagePath s; 14 imagePullPolicy s; 15 securityContext SecurityContext; 16 stdin b; 17 stdinOnce b; 18 tty b; 19 envFrom []EnvFromSource; 20 terminationMessagePolicy s; 24 restartPolicy s
ContainerPort: 1 name s; 2 hostPort i32; 3 containerPort i32; 4 protocol s; 5 hostIP s
EnvVar: 1 name s; 2 value s; 3 valueFrom EnvVarSource
EnvVarSource: 1 fieldRef ObjectFieldSelector; 2 resourceFieldRef ResourceFieldSelector; 3 configMapKeyRef ConfigMapKeySelector; 4 secretKeyRef SecretKeySelector
ObjectFieldSelector: 1 apiVersion s; 2 fieldPath s
ResourceFieldSelector: 1 containerName s; 2 resource s; 3 divisor Quantity
ConfigMapKeySelector: 1 _ ^LocalObjectReference; 2 key s; 3 optional b!
SecretKeySelector: 1 _ ^LocalObjectReference; 2 key s; 3 optional b!
EnvFromSource: 1 prefix s; 2 configMapRef ConfigMapEnvSource; 3 secretRef SecretEnvSource
ConfigMapEnvSource: 1 _ ^LocalObjectReference; 2 optional b!
SecretEnvSource: 1 _ ^LocalObjectReference; 2 optional b!
ResourceRequirements: 1 limits map<Quantity>; 2 requests map<Quantity>
VolumeMount: 1 name s; 2 readOnly b; 3 mountPath s; 4 subPath s; 5 mountPropagation s; 6 subPathExpr s; 7 recursiveReadOnly s
Volume: 1 name s; 2 _ ^VolumeSource
VolumeSource: 1 hostPath HostPathVolumeSource; 2 emptyDir EmptyDirVolumeSource; 6 secret SecretVolumeSource; 10 persistentVolumeClaim PersistentVolumeClaimVolumeSource; 19 configMap ConfigMapVolumeSource
HostPathVolumeSource: 1 path s; 2 type s!
EmptyDirVolumeSource: 1 medium s; 2 sizeLimit Quantity
SecretVolumeSource: 1 secretName s; 2 items []KeyToPath; 3 defaultMode i32!; 4 optional b!
ConfigMapVolumeSource: 1 _ ^LocalObjectReference; 2 items []KeyToPath; 3 defaultMode i32!; 4 optional b!
PersistentVolumeClaimVolumeSource: 1 claimName s; 2 readOnly b
KeyToPath: 1 key s; 2 path s; 3 mode i32!
PodSecurityContext: 2 runAsUser i64!; 3 runAsNonRoot b!; 4 supplementalGroups []i64; 5 fsGroup i64!; 6 runAsGroup i64!; 9 fsGroupChangePolicy s
SecurityContext: 1 capabilities Capabilities; 2 privileged b!; 4 runAsUser i64!; 5 runAsNonRoot b!; 6 readOnlyRootFilesystem b!; 7 allowPrivilegeEscalation b!; 8 runAsGroup i64!; 9 procMount s
Capabilities: 1 add []s; 2 drop []s
Toleration: 1 key s; 2 operator s; 3 value s; 4 effect s; 5 tolerationSeconds i64!
ResourceQuota: 1 metadata ObjectMeta; 2 spec ResourceQuotaSpec; 3 status -
ResourceQuotaSpec: 1 hard map<Quantity>; 2 scopes []s
Deployment: 1 metadata ObjectMeta; 2 spec DeploymentSpec; 3 status -
DeploymentSpec: 1 replicas i32!; 2 selector LabelSelector; 3 template PodTemplateSpec; 4 strategy DeploymentStrategy; 5 minReadySeconds i32; 6 revisionHistoryLimit i32!; 7 paused b; 9 progressDeadlineSeconds i32!
DeploymentStrategy: 1 type s; 2 rollingUpdate RollingUpdateDeployment
RollingUpdateDeployment: 1 maxUnavailable IntOrString; 2 maxSurge IntOrString
Job: 1 metadata ObjectMeta; 2 spec JobSpec; 3 status -
JobSpec: 1 parallelism i32!; 2 completions i32!; 3 activeDeadlineSeconds i64!; 4 selector LabelSelector; 5 manualSelector b!; 6 template PodTemplateSpec; 7 backoffLimit i32!; 8 ttlSecondsAfterFinished i32!; 9 completionMode s!; 10 suspend b!; 14 podReplacementPolicy s!; 15 managedBy s!
CronJob: 1 metadata ObjectMeta; 2 spec CronJobSpec; 3 status -
CronJobSpec: 1 schedule s; 2 startingDeadlineSeconds i64!; 3 concurrencyPolicy s; 4 suspend b!; 5 jobTemplate JobTemplateSpec; 6 successfulJobsHistoryLimit i32!; 7 failedJobsHistoryLimit i32!; 8 timeZone s!
JobTemplateSpec: 1 metadata ObjectMeta; 2 spec JobSpec
Role: 1 metadata ObjectMeta; 2 rules []PolicyRule
ClusterRole: 1 metadata ObjectMeta; 2 rules []PolicyRule; 3 aggregationRule AggregationRule
AggregationRule: 1 clusterRoleSelectors []LabelSelector
PolicyRule: 1 verbs []s; 2 apiGroups []s; 3 resources []s; 4 resourceNames []s; 5 nonResourceURLs []s
RoleBinding: 1 metadata ObjectMeta; 2 subjects []Subject; 3 roleRef RoleRef
ClusterRoleBinding: 1 metadata ObjectMeta; 2 subjects []Subject; 3 roleRef RoleRef
Subject: 1 kind s; 2 apiGroup s; 3 name s; 4 namespace s
RoleRef: 1 apiGroup s; 2 kind s; 3 name s
PodDisruptionBudget: 1 metadata ObjectMeta; 2 spec PodDisruptionBudgetSpec; 3 status -
PodDisruptionBudgetSpec: 1 minAvailable IntOrString; 2 selector LabelSelector; 3 maxUnavailable IntOrString; 4 unhealthyPodEvictionPolicy s!
PriorityClass: 1 metadata ObjectMeta; 2 value i32; 3 globalDefault b; 4 description s; 5 preemptionPolicy s!
SelfSubjectAccessReview: 1 metadata ObjectMeta; 2 spec SelfSubjectAccessReviewSpec; 3 status -
SelfSubjectAccessReviewSpec: 1 resourceAttributes ResourceAttributes; 2 nonResourceAttributes NonResourceAttributes
SubjectAccessReview: 1 metadata ObjectMeta; 2 spec SubjectAccessReviewSpec; 3 status -
LocalSubjectAccessReview: 1 metadata ObjectMeta; 2 spec SubjectAccessReviewSpec; 3 status -
SubjectAccessReviewSpec: 1 resourceAttributes ResourceAttributes; 2 nonResourceAttributes NonResourceAttributes; 3 user s; 4 groups []s; 5 extra -; 6 uid s
ResourceAttributes: 1 namespace s; 2 verb s; 3 group s; 4 version s; 5 resource s; 6 subresource s; 7 name s; 8 fieldSelector -; 9 labelSelector -
NonResourceAttributes: 1 path s; 2 verb s
SelfSubjectReview: 1 metadata ObjectMeta; 2 status -
Eviction: 1 metadata ObjectMeta; 2 deleteOptions DeleteOptions
TokenRequest: 1 metadata ObjectMeta; 2 spec TokenRequestSpec; 3 status -
TokenRequestSpec: 1 audiences []s; 3 boundObjectRef BoundObjectReference; 4 expirationSeconds i64!
BoundObjectReference: 1 kind s; 2 apiVersion s; 3 name s; 4 uid s
CertificateSigningRequest: 1 metadata ObjectMeta; 2 spec CertificateSigningRequestSpec; 3 status CertificateSigningRequestStatus
CertificateSigningRequestSpec: 1 request bytes; 7 signerName s; 8 expirationSeconds i32!; 5 usages []s; 2 username s; 3 uid s; 4 groups []s; 6 extra -
CertificateSigningRequestStatus: 1 conditions []CertificateSigningRequestCondition; 2 certificate bytes
CertificateSigningRequestCondition: 1 type s; 6 status s; 2 reason s; 3 message s; 4 lastUpdateTime Time; 5 lastTransitionTime Time
HorizontalPodAutoscaler: 1 metadata ObjectMeta; 2 spec HorizontalPodAutoscalerSpec; 3 status -
HorizontalPodAutoscalerSpec: 1 scaleTargetRef CrossVersionObjectReference; 2 minReplicas i32!; 3 maxReplicas i32; 4 metrics []MetricSpec; 5 behavior HorizontalPodAutoscalerBehavior
CrossVersionObjectReference: 1 kind s; 2 name s; 3 apiVersion s
MetricSpec: 1 type s; 2 object ObjectMetricSource; 3 pods PodsMetricSource; 4 resource ResourceMetricSource; 5 external ExternalMetricSource; 7 containerResource ContainerResourceMetricSource
ObjectMetricSource: 1 describedObject CrossVersionObjectReference; 2 target MetricTarget; 3 metric MetricIdentifier
PodsMetricSource: 1 metric MetricIdentifier; 2 target MetricTarget
ResourceMetricSource: 1 name s; 2 target MetricTarget
ContainerResourceMetricSource: 1 name s; 2 target MetricTarget; 3 container s
ExternalMetricSource: 1 metric MetricIdentifier; 2 target MetricTarget
MetricIdentifier: 1 name s; 2 selector LabelSelector
MetricTarget: 1 type s; 2 value Quantity; 3 averageValue Quantity; 4 averageUtilization i32!
HorizontalPodAutoscalerBehavior: 1 scaleUp HPAScalingRules; 2 scaleDown HPAScalingRules
HPAScalingRules: 3 stabilizationWindowSeconds i32!; 1 selectPolicy s!; 2 policies []HPAScalingPolicy; 4 tolerance Quantity
HPAScalingPolicy: 1 type s; 2 value i32; 3 periodSeconds i32
HorizontalPodAutoscalerV1: 1 metadata ObjectMeta; 2 spec HorizontalPodAutoscalerSpecV1; 3 status -
HorizontalPodAutoscalerSpecV1: 1 scaleTargetRef CrossVersionObjectReference; 2 minReplicas i32!; 3 maxReplicas i32; 4 targetCPUUtilizationPercentage i32!
"#;

/// The type of a field.
#[derive(Debug, Clone)]
pub enum Ty {
    Str,
    Bool,
    I32,
    I64,
    Bytes,
    Time,
    IntOrString,
    Quantity,
    Raw,
    Skip,
    Message(&'static Message),
    Inline(&'static Message),
    Map(Box<Ty>),
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    pub number: u32,
    pub name: &'static str,
    pub ty: Ty,
    pub repeated: bool,
    pub pointer: bool,
}

/// One message.
#[derive(Debug)]
pub struct Message {
    pub name: &'static str,
    pub fields: Vec<Field>,
}

/// Every message by name. Built once; the notation is part of the binary, so a mistake in it
/// is a bug caught by the tests, and parsing panics rather than serving a wrong schema.
fn messages() -> &'static HashMap<&'static str, &'static Message> {
    static MESSAGES: OnceLock<HashMap<&'static str, &'static Message>> = OnceLock::new();
    MESSAGES.get_or_init(build)
}

/// The message of a top-level kind (the envelope's `apiVersion` and `kind`).
pub fn for_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    const KINDS: &[&str] = &[
        "Namespace",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Service",
        "Pod",
        "ResourceQuota",
        "Deployment",
        "Job",
        "CronJob",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "PodDisruptionBudget",
        "PriorityClass",
        "DeleteOptions",
        "SelfSubjectAccessReview",
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "SelfSubjectReview",
        "TokenRequest",
        "Eviction",
        "HorizontalPodAutoscaler",
        "HorizontalPodAutoscalerV1",
        // `kubectl certificate approve` puts the whole object to `/approval` in protobuf.
        "CertificateSigningRequest",
    ];
    // A kind served in versions whose messages differ: the version picks the message.
    let kind = match (api_version, kind) {
        ("autoscaling/v1", "HorizontalPodAutoscaler") => "HorizontalPodAutoscalerV1",
        _ => kind,
    };
    if !KINDS.contains(&kind) {
        return None;
    }
    messages().get(kind).copied()
}

fn build() -> HashMap<&'static str, &'static Message> {
    // Messages are leaked once for the life of the process: they are the static schema.
    // Two passes, so a message may refer to one defined later in the text.
    let lines: Vec<(&'static str, &'static str)> = SCHEMA
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_once(':').expect("schema line has a colon"))
        .map(|(n, f)| (n.trim(), f))
        .collect();
    let mut order: Vec<&'static str> = Vec::new();
    let mut deps: HashMap<&'static str, Vec<&'static str>> = HashMap::new();
    for (name, fields) in &lines {
        let refs = fields
            .split(';')
            .filter_map(|f| f.split_whitespace().nth(2))
            .map(|t| t.trim_start_matches("[]").trim_start_matches('^'))
            .filter(|t| t.starts_with(|c: char| c.is_ascii_uppercase()))
            .filter(|t| !matches!(*t, "Time" | "IntOrString" | "Quantity" | "Raw"))
            .collect();
        deps.insert(name, refs);
    }
    // Topological order: a message is built after the messages it contains.
    fn visit(
        n: &'static str,
        deps: &HashMap<&'static str, Vec<&'static str>>,
        seen: &mut Vec<&'static str>,
        order: &mut Vec<&'static str>,
    ) {
        if seen.contains(&n) {
            return;
        }
        seen.push(n);
        for d in deps.get(n).map(Vec::as_slice).unwrap_or(&[]) {
            visit(d, deps, seen, order);
        }
        order.push(n);
    }
    let mut seen = Vec::new();
    for (name, _) in &lines {
        visit(name, &deps, &mut seen, &mut order);
    }
    let texts: HashMap<&'static str, &'static str> = lines.into_iter().collect();
    let mut built: HashMap<&'static str, &'static Message> = HashMap::new();
    for name in order {
        let text = texts
            .get(name)
            .unwrap_or_else(|| panic!("schema: unknown message {name}"));
        let fields = text
            .split(';')
            .filter(|f| !f.trim().is_empty())
            .map(|f| parse_field(f, &built))
            .collect();
        let message: &'static Message = Box::leak(Box::new(Message { name, fields }));
        built.insert(name, message);
    }
    built
}

fn parse_field(text: &'static str, built: &HashMap<&'static str, &'static Message>) -> Field {
    let parts: Vec<&'static str> = text.split_whitespace().collect();
    let [number, name, ty] = parts.as_slice() else {
        panic!("schema: bad field {text:?}");
    };
    let number: u32 = number
        .parse()
        .unwrap_or_else(|_| panic!("schema: bad number in {text:?}"));
    let (ty, repeated) = match ty.strip_prefix("[]") {
        Some(t) => (t, true),
        None => (*ty, false),
    };
    let (ty, pointer) = match ty.strip_suffix('!') {
        Some(t) => (t, true),
        None => (ty, false),
    };
    Field {
        number,
        name,
        ty: parse_type(ty, built),
        repeated,
        pointer,
    }
}

fn parse_type(ty: &str, built: &HashMap<&'static str, &'static Message>) -> Ty {
    let message = |n: &str| {
        *built
            .get(n)
            .unwrap_or_else(|| panic!("schema: message {n} not defined"))
    };
    match ty {
        "s" => Ty::Str,
        "b" => Ty::Bool,
        "i32" => Ty::I32,
        "i64" => Ty::I64,
        "bytes" => Ty::Bytes,
        "Time" => Ty::Time,
        "IntOrString" => Ty::IntOrString,
        "Quantity" => Ty::Quantity,
        "Raw" => Ty::Raw,
        "-" => Ty::Skip,
        t if t.starts_with("map<") && t.ends_with('>') => {
            Ty::Map(Box::new(parse_type(&t[4..t.len() - 1], built)))
        }
        t if t.starts_with('^') => Ty::Inline(message(&t[1..])),
        t => Ty::Message(message(t)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_parses_and_every_kind_has_metadata() {
        for kind in [
            "Namespace",
            "Deployment",
            "CronJob",
            "ClusterRoleBinding",
            "PriorityClass",
        ] {
            let m = super::for_kind("", kind).unwrap();
            assert!(
                m.fields
                    .iter()
                    .any(|f| f.name == "metadata" && f.number == 1),
                "{kind}"
            );
        }
        assert!(super::for_kind("v1", "DeleteOptions").is_some());
        assert!(super::for_kind("v1", "Node").is_none());
        let v1 = super::for_kind("autoscaling/v1", "HorizontalPodAutoscaler").unwrap();
        let v2 = super::for_kind("autoscaling/v2", "HorizontalPodAutoscaler").unwrap();
        assert_eq!(
            (v1.name, v2.name),
            ("HorizontalPodAutoscalerV1", "HorizontalPodAutoscaler")
        );
    }
}
