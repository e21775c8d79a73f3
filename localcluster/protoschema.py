"""Field tables of the Kubernetes protobuf messages that kubectl's imperative commands send.

One entry per message: ``number jsonName type`` separated by ``;``. The field numbers and names
are those of the ``generated.proto`` files of k8s.io/api and k8s.io/apimachinery v0.32 (read from
the descriptors compiled into kubectl 1.32); Kubernetes names each proto field after its JSON key,
so the name is the JSON key too (the table holds the JSON key where they differ:
``BoundObjectReference.uid`` is ``uID`` in protobuf). Types:

- ``string bytes int32 int64 uint32 uint64 bool double float``: scalars;
- ``core.X``, ``meta.X``, ...: a message of this table; ``resource.Quantity``,
  ``intstr.IntOrString``, ``meta.Time``, ``meta.MicroTime``, ``meta.FieldsV1`` and
  ``runtime.RawExtension`` have JSON forms of their own (see :mod:`kadmit.localcluster.protobuf`);
- ``[]T``: repeated; ``{}T``: a map with string keys;
- a trailing ``?``: a Go pointer (or a field JSON never omits), so a zero value on the wire is
  kept; without it a zero value is dropped, as ``omitempty`` drops it from JSON. The marks were
  checked against the Go type information in the kubectl 1.32 binary wherever a field's struct
  tag is unique to it; the others (shared tags such as ``readOnly``) were set by hand;
- the name ``-``: a Go struct embedded inline, whose fields join the parent's in JSON;
- an entry ``= core.X`` instead of fields: the same fields, numbers and all, as ``core.X``
  (``EphemeralContainerCommon`` is, by its own definition, a copy of ``Container``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

SCALARS = frozenset({"string", "bytes", "int32", "int64", "uint32", "uint64", "bool", "double", "float"})
SPECIAL = frozenset(
    {
        "resource.Quantity",
        "intstr.IntOrString",
        "meta.Time",
        "meta.MicroTime",
        "meta.FieldsV1",
        "runtime.RawExtension",
    }
)

# (apiVersion, kind) of a runtime.Unknown envelope -> the message its raw bytes hold.
TOP_LEVEL: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "core.Namespace",
    ("v1", "Pod"): "core.Pod",
    ("v1", "ResourceQuota"): "core.ResourceQuota",
    ("v1", "ConfigMap"): "core.ConfigMap",
    ("v1", "Secret"): "core.Secret",
    ("v1", "ServiceAccount"): "core.ServiceAccount",
    ("v1", "Service"): "core.Service",
    ("batch/v1", "Job"): "batch.Job",
    ("apps/v1", "Deployment"): "apps.Deployment",
    ("scheduling.k8s.io/v1", "PriorityClass"): "scheduling.PriorityClass",
    ("policy/v1", "PodDisruptionBudget"): "policy.PodDisruptionBudget",
    ("policy/v1", "Eviction"): "policy.Eviction",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "authentication.SelfSubjectReview",
    ("authentication.k8s.io/v1", "TokenRequest"): "authentication.TokenRequest",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "authorization.SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "authorization.SelfSubjectRulesReview",
    ("rbac.authorization.k8s.io/v1", "Role"): "rbac.Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rbac.RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "rbac.ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "rbac.ClusterRoleBinding",
}
# DeleteOptions is registered in every group version, so any apiVersion names it.
ANY_VERSION: dict[str, str] = {"DeleteOptions": "meta.DeleteOptions"}

# Messages whose unknown fields are refused rather than skipped: dropping one would change what
# the object means (a volume with no source), so the client must send JSON instead.
STRICT: dict[str, str] = {
    "core.VolumeSource": "a volume source",
    "core.VolumeProjection": "a projected volume source",
}

SCHEMA = """
core.Namespace:
    1 metadata meta.ObjectMeta; 2 spec core.NamespaceSpec; 3 status core.NamespaceStatus
core.Pod:
    1 metadata meta.ObjectMeta; 2 spec core.PodSpec; 3 status core.PodStatus
batch.Job:
    1 metadata meta.ObjectMeta; 2 spec batch.JobSpec; 3 status batch.JobStatus
core.ResourceQuota:
    1 metadata meta.ObjectMeta; 2 spec core.ResourceQuotaSpec; 3 status core.ResourceQuotaStatus
core.ConfigMap:
    1 metadata meta.ObjectMeta; 4 immutable bool?; 2 data {}string; 3 binaryData {}bytes
core.Secret:
    1 metadata meta.ObjectMeta; 5 immutable bool?; 2 data {}bytes; 4 stringData {}string;
    3 type string
core.ServiceAccount:
    1 metadata meta.ObjectMeta; 2 secrets []core.ObjectReference;
    3 imagePullSecrets []core.LocalObjectReference; 4 automountServiceAccountToken bool?
core.Service:
    1 metadata meta.ObjectMeta; 2 spec core.ServiceSpec; 3 status core.ServiceStatus
meta.DeleteOptions:
    1 gracePeriodSeconds int64?; 2 preconditions meta.Preconditions; 3 orphanDependents bool?;
    4 propagationPolicy string?; 5 dryRun []string;
    6 ignoreStoreReadErrorWithClusterBreakingPotential bool?
scheduling.PriorityClass:
    1 metadata meta.ObjectMeta; 2 value int32?; 3 globalDefault bool; 4 description string;
    5 preemptionPolicy string?
apps.Deployment:
    1 metadata meta.ObjectMeta; 2 spec apps.DeploymentSpec; 3 status apps.DeploymentStatus
authentication.SelfSubjectReview:
    1 metadata meta.ObjectMeta; 2 status authentication.SelfSubjectReviewStatus
authentication.SelfSubjectReviewStatus:
    1 userInfo authentication.UserInfo
authentication.UserInfo:
    1 username string; 2 uid string; 3 groups []string; 4 extra {}authentication.ExtraValue
authentication.ExtraValue:
    1 items []string
authentication.TokenRequest:
    1 metadata meta.ObjectMeta; 2 spec authentication.TokenRequestSpec;
    3 status authentication.TokenRequestStatus
authentication.TokenRequestSpec:
    1 audiences []string; 4 expirationSeconds int64?; 3 boundObjectRef authentication.BoundObjectReference
authentication.TokenRequestStatus:
    1 token string; 2 expirationTimestamp meta.Time
authentication.BoundObjectReference:
    1 kind string; 2 apiVersion string; 3 name string; 4 uid string
authorization.SelfSubjectAccessReview:
    1 metadata meta.ObjectMeta; 2 spec authorization.SelfSubjectAccessReviewSpec;
    3 status authorization.SubjectAccessReviewStatus
authorization.SelfSubjectAccessReviewSpec:
    1 resourceAttributes authorization.ResourceAttributes;
    2 nonResourceAttributes authorization.NonResourceAttributes
authorization.SubjectAccessReviewStatus:
    1 allowed bool?; 4 denied bool; 2 reason string; 3 evaluationError string
authorization.ResourceAttributes:
    1 namespace string; 2 verb string; 3 group string; 4 version string; 5 resource string;
    6 subresource string; 7 name string; 8 fieldSelector authorization.FieldSelectorAttributes;
    9 labelSelector authorization.LabelSelectorAttributes
authorization.SelfSubjectRulesReview:
    1 metadata meta.ObjectMeta; 2 spec authorization.SelfSubjectRulesReviewSpec;
    3 status authorization.SubjectRulesReviewStatus
authorization.SelfSubjectRulesReviewSpec:
    1 namespace string
authorization.SubjectRulesReviewStatus:
    1 resourceRules []authorization.ResourceRule; 2 nonResourceRules []authorization.NonResourceRule;
    3 incomplete bool; 4 evaluationError string
authorization.ResourceRule:
    1 verbs []string; 2 apiGroups []string; 3 resources []string; 4 resourceNames []string
authorization.NonResourceRule:
    1 verbs []string; 2 nonResourceURLs []string
authorization.NonResourceAttributes:
    1 path string; 2 verb string
authorization.FieldSelectorAttributes:
    1 rawSelector string; 2 requirements []meta.FieldSelectorRequirement
authorization.LabelSelectorAttributes:
    1 rawSelector string; 2 requirements []meta.LabelSelectorRequirement
meta.FieldSelectorRequirement:
    1 key string; 2 operator string; 3 values []string
policy.Eviction:
    1 metadata meta.ObjectMeta; 2 deleteOptions meta.DeleteOptions
policy.PodDisruptionBudget:
    1 metadata meta.ObjectMeta; 2 spec policy.PodDisruptionBudgetSpec;
    3 status policy.PodDisruptionBudgetStatus
rbac.Role:
    1 metadata meta.ObjectMeta; 2 rules []rbac.PolicyRule
rbac.RoleBinding:
    1 metadata meta.ObjectMeta; 2 subjects []rbac.Subject; 3 roleRef rbac.RoleRef
rbac.ClusterRole:
    1 metadata meta.ObjectMeta; 2 rules []rbac.PolicyRule; 3 aggregationRule rbac.AggregationRule
rbac.ClusterRoleBinding:
    1 metadata meta.ObjectMeta; 2 subjects []rbac.Subject; 3 roleRef rbac.RoleRef
meta.ObjectMeta:
    1 name string; 2 generateName string; 3 namespace string; 4 selfLink string; 5 uid string;
    6 resourceVersion string; 7 generation int64; 8 creationTimestamp meta.Time;
    9 deletionTimestamp meta.Time?; 10 deletionGracePeriodSeconds int64?; 11 labels {}string;
    12 annotations {}string; 13 ownerReferences []meta.OwnerReference; 14 finalizers []string;
    17 managedFields []meta.ManagedFieldsEntry
core.NamespaceSpec:
    1 finalizers []string
core.NamespaceStatus:
    1 phase string; 2 conditions []core.NamespaceCondition
core.PodSpec:
    1 volumes []core.Volume; 20 initContainers []core.Container; 2 containers []core.Container;
    34 ephemeralContainers []core.EphemeralContainer; 3 restartPolicy string;
    4 terminationGracePeriodSeconds int64?; 5 activeDeadlineSeconds int64?; 6 dnsPolicy string;
    7 nodeSelector {}string; 8 serviceAccountName string; 9 serviceAccount string;
    21 automountServiceAccountToken bool?; 10 nodeName string; 11 hostNetwork bool;
    12 hostPID bool; 13 hostIPC bool; 27 shareProcessNamespace bool?;
    14 securityContext core.PodSecurityContext; 15 imagePullSecrets []core.LocalObjectReference;
    16 hostname string; 17 subdomain string; 18 affinity core.Affinity; 19 schedulerName string;
    22 tolerations []core.Toleration; 23 hostAliases []core.HostAlias; 24 priorityClassName string;
    25 priority int32?; 26 dnsConfig core.PodDNSConfig; 28 readinessGates []core.PodReadinessGate;
    29 runtimeClassName string?; 30 enableServiceLinks bool?; 31 preemptionPolicy string?;
    32 overhead {}resource.Quantity; 33 topologySpreadConstraints []core.TopologySpreadConstraint;
    35 setHostnameAsFQDN bool?; 36 os core.PodOS; 37 hostUsers bool?;
    38 schedulingGates []core.PodSchedulingGate; 39 resourceClaims []core.PodResourceClaim;
    40 resources core.ResourceRequirements
core.PodStatus:
    1 phase string; 2 conditions []core.PodCondition; 3 message string; 4 reason string;
    11 nominatedNodeName string; 5 hostIP string; 16 hostIPs []core.HostIP; 6 podIP string;
    12 podIPs []core.PodIP; 7 startTime meta.Time?;
    10 initContainerStatuses []core.ContainerStatus; 8 containerStatuses []core.ContainerStatus;
    9 qosClass string; 13 ephemeralContainerStatuses []core.ContainerStatus; 14 resize string;
    15 resourceClaimStatuses []core.PodResourceClaimStatus
batch.JobSpec:
    1 parallelism int32?; 2 completions int32?; 3 activeDeadlineSeconds int64?;
    11 podFailurePolicy batch.PodFailurePolicy; 16 successPolicy batch.SuccessPolicy;
    7 backoffLimit int32?; 12 backoffLimitPerIndex int32?; 13 maxFailedIndexes int32?;
    4 selector meta.LabelSelector; 5 manualSelector bool?; 6 template core.PodTemplateSpec;
    8 ttlSecondsAfterFinished int32?; 9 completionMode string?; 10 suspend bool?;
    14 podReplacementPolicy string?; 15 managedBy string?
batch.JobStatus:
    1 conditions []batch.JobCondition; 2 startTime meta.Time?; 3 completionTime meta.Time?;
    4 active int32; 5 succeeded int32; 6 failed int32; 11 terminating int32?;
    7 completedIndexes string; 10 failedIndexes string?;
    8 uncountedTerminatedPods batch.UncountedTerminatedPods; 9 ready int32?
core.ResourceQuotaSpec:
    1 hard {}resource.Quantity; 2 scopes []string; 3 scopeSelector core.ScopeSelector
core.ResourceQuotaStatus:
    1 hard {}resource.Quantity; 2 used {}resource.Quantity
core.ObjectReference:
    1 kind string; 2 namespace string; 3 name string; 4 uid string; 5 apiVersion string;
    6 resourceVersion string; 7 fieldPath string
core.LocalObjectReference:
    1 name string
core.ServiceSpec:
    1 ports []core.ServicePort; 2 selector {}string; 3 clusterIP string; 18 clusterIPs []string;
    4 type string; 5 externalIPs []string; 7 sessionAffinity string; 8 loadBalancerIP string;
    9 loadBalancerSourceRanges []string; 10 externalName string; 11 externalTrafficPolicy string;
    12 healthCheckNodePort int32; 13 publishNotReadyAddresses bool;
    14 sessionAffinityConfig core.SessionAffinityConfig; 19 ipFamilies []string;
    17 ipFamilyPolicy string?; 20 allocateLoadBalancerNodePorts bool?;
    21 loadBalancerClass string?; 22 internalTrafficPolicy string?; 23 trafficDistribution string?
core.ServiceStatus:
    1 loadBalancer core.LoadBalancerStatus; 2 conditions []meta.Condition
meta.Preconditions:
    1 uid string?; 2 resourceVersion string?
apps.DeploymentSpec:
    1 replicas int32?; 2 selector meta.LabelSelector; 3 template core.PodTemplateSpec;
    4 strategy apps.DeploymentStrategy; 5 minReadySeconds int32; 6 revisionHistoryLimit int32?;
    7 paused bool; 9 progressDeadlineSeconds int32?
apps.DeploymentStatus:
    1 observedGeneration int64; 2 replicas int32; 3 updatedReplicas int32; 7 readyReplicas int32;
    4 availableReplicas int32; 5 unavailableReplicas int32;
    6 conditions []apps.DeploymentCondition; 8 collisionCount int32?
policy.PodDisruptionBudgetSpec:
    1 minAvailable intstr.IntOrString?; 2 selector meta.LabelSelector;
    3 maxUnavailable intstr.IntOrString?; 4 unhealthyPodEvictionPolicy string?
policy.PodDisruptionBudgetStatus:
    1 observedGeneration int64; 2 disruptedPods {}meta.Time; 3 disruptionsAllowed int32;
    4 currentHealthy int32; 5 desiredHealthy int32; 6 expectedPods int32;
    7 conditions []meta.Condition
rbac.PolicyRule:
    1 verbs []string; 2 apiGroups []string; 3 resources []string; 4 resourceNames []string;
    5 nonResourceURLs []string
rbac.Subject:
    1 kind string; 2 apiGroup string; 3 name string; 4 namespace string
rbac.RoleRef:
    1 apiGroup string; 2 kind string; 3 name string
rbac.AggregationRule:
    1 clusterRoleSelectors []meta.LabelSelector
meta.OwnerReference:
    5 apiVersion string; 1 kind string; 3 name string; 4 uid string; 6 controller bool?;
    7 blockOwnerDeletion bool?
meta.ManagedFieldsEntry:
    1 manager string; 2 operation string; 3 apiVersion string; 4 time meta.Time?;
    6 fieldsType string; 7 fieldsV1 meta.FieldsV1?; 8 subresource string
core.NamespaceCondition:
    1 type string; 2 status string; 4 lastTransitionTime meta.Time; 5 reason string;
    6 message string
core.Volume:
    1 name string; 2 - core.VolumeSource
core.Container:
    1 name string; 2 image string; 3 command []string; 4 args []string; 5 workingDir string;
    6 ports []core.ContainerPort; 19 envFrom []core.EnvFromSource; 7 env []core.EnvVar;
    8 resources core.ResourceRequirements; 23 resizePolicy []core.ContainerResizePolicy;
    24 restartPolicy string?; 9 volumeMounts []core.VolumeMount;
    21 volumeDevices []core.VolumeDevice; 10 livenessProbe core.Probe;
    11 readinessProbe core.Probe; 22 startupProbe core.Probe; 12 lifecycle core.Lifecycle;
    13 terminationMessagePath string; 20 terminationMessagePolicy string;
    14 imagePullPolicy string; 15 securityContext core.SecurityContext; 16 stdin bool;
    17 stdinOnce bool; 18 tty bool
core.EphemeralContainer:
    1 - core.EphemeralContainerCommon; 2 targetContainerName string
core.PodSecurityContext:
    1 seLinuxOptions core.SELinuxOptions; 8 windowsOptions core.WindowsSecurityContextOptions;
    2 runAsUser int64?; 6 runAsGroup int64?; 3 runAsNonRoot bool?; 4 supplementalGroups []int64;
    12 supplementalGroupsPolicy string?; 5 fsGroup int64?; 7 sysctls []core.Sysctl;
    9 fsGroupChangePolicy string?; 10 seccompProfile core.SeccompProfile;
    11 appArmorProfile core.AppArmorProfile; 13 seLinuxChangePolicy string?
core.Affinity:
    1 nodeAffinity core.NodeAffinity; 2 podAffinity core.PodAffinity;
    3 podAntiAffinity core.PodAntiAffinity
core.Toleration:
    1 key string; 2 operator string; 3 value string; 4 effect string; 5 tolerationSeconds int64?
core.HostAlias:
    1 ip string; 2 hostnames []string
core.PodDNSConfig:
    1 nameservers []string; 2 searches []string; 3 options []core.PodDNSConfigOption
core.PodReadinessGate:
    1 conditionType string
core.TopologySpreadConstraint:
    1 maxSkew int32; 2 topologyKey string; 3 whenUnsatisfiable string;
    4 labelSelector meta.LabelSelector; 5 minDomains int32?; 6 nodeAffinityPolicy string?;
    7 nodeTaintsPolicy string?; 8 matchLabelKeys []string
core.PodOS:
    1 name string
core.PodSchedulingGate:
    1 name string
core.PodResourceClaim:
    1 name string; 3 resourceClaimName string?; 4 resourceClaimTemplateName string?
core.ResourceRequirements:
    1 limits {}resource.Quantity; 2 requests {}resource.Quantity; 3 claims []core.ResourceClaim
core.PodCondition:
    1 type string; 2 status string; 3 lastProbeTime meta.Time; 4 lastTransitionTime meta.Time;
    5 reason string; 6 message string
core.HostIP:
    1 ip string
core.PodIP:
    1 ip string
core.ContainerStatus:
    1 name string; 2 state core.ContainerState; 3 lastState core.ContainerState; 4 ready bool?;
    5 restartCount int32?; 6 image string; 7 imageID string; 8 containerID string; 9 started bool?;
    10 allocatedResources {}resource.Quantity; 11 resources core.ResourceRequirements;
    12 volumeMounts []core.VolumeMountStatus; 13 user core.ContainerUser;
    14 allocatedResourcesStatus []core.ResourceStatus
core.PodResourceClaimStatus:
    1 name string; 2 resourceClaimName string?
batch.PodFailurePolicy:
    1 rules []batch.PodFailurePolicyRule
batch.SuccessPolicy:
    1 rules []batch.SuccessPolicyRule
meta.LabelSelector:
    1 matchLabels {}string; 2 matchExpressions []meta.LabelSelectorRequirement
core.PodTemplateSpec:
    1 metadata meta.ObjectMeta; 2 spec core.PodSpec
batch.JobCondition:
    1 type string; 2 status string; 3 lastProbeTime meta.Time; 4 lastTransitionTime meta.Time;
    5 reason string; 6 message string
batch.UncountedTerminatedPods:
    1 succeeded []string; 2 failed []string
core.ScopeSelector:
    1 matchExpressions []core.ScopedResourceSelectorRequirement
core.ServicePort:
    1 name string; 2 protocol string; 6 appProtocol string?; 3 port int32;
    4 targetPort intstr.IntOrString; 5 nodePort int32
core.SessionAffinityConfig:
    1 clientIP core.ClientIPConfig
core.LoadBalancerStatus:
    1 ingress []core.LoadBalancerIngress
meta.Condition:
    1 type string; 2 status string; 3 observedGeneration int64; 4 lastTransitionTime meta.Time;
    5 reason string; 6 message string
apps.DeploymentStrategy:
    1 type string; 2 rollingUpdate apps.RollingUpdateDeployment
apps.DeploymentCondition:
    1 type string; 2 status string; 6 lastUpdateTime meta.Time; 7 lastTransitionTime meta.Time;
    4 reason string; 5 message string
core.VolumeSource:
    1 hostPath core.HostPathVolumeSource; 2 emptyDir core.EmptyDirVolumeSource;
    3 gcePersistentDisk core.GCEPersistentDiskVolumeSource;
    4 awsElasticBlockStore core.AWSElasticBlockStoreVolumeSource;
    5 gitRepo core.GitRepoVolumeSource; 6 secret core.SecretVolumeSource;
    7 nfs core.NFSVolumeSource; 8 iscsi core.ISCSIVolumeSource;
    9 glusterfs core.GlusterfsVolumeSource;
    10 persistentVolumeClaim core.PersistentVolumeClaimVolumeSource; 11 rbd core.RBDVolumeSource;
    12 flexVolume core.FlexVolumeSource; 13 cinder core.CinderVolumeSource;
    14 cephfs core.CephFSVolumeSource; 15 flocker core.FlockerVolumeSource;
    16 downwardAPI core.DownwardAPIVolumeSource; 17 fc core.FCVolumeSource;
    18 azureFile core.AzureFileVolumeSource; 19 configMap core.ConfigMapVolumeSource;
    20 vsphereVolume core.VsphereVirtualDiskVolumeSource; 21 quobyte core.QuobyteVolumeSource;
    22 azureDisk core.AzureDiskVolumeSource;
    23 photonPersistentDisk core.PhotonPersistentDiskVolumeSource;
    26 projected core.ProjectedVolumeSource; 24 portworxVolume core.PortworxVolumeSource;
    25 scaleIO core.ScaleIOVolumeSource; 27 storageos core.StorageOSVolumeSource;
    28 csi core.CSIVolumeSource; 29 ephemeral core.EphemeralVolumeSource;
    30 image core.ImageVolumeSource
core.ContainerPort:
    1 name string; 2 hostPort int32; 3 containerPort int32; 4 protocol string; 5 hostIP string
core.EnvFromSource:
    1 prefix string; 2 configMapRef core.ConfigMapEnvSource; 3 secretRef core.SecretEnvSource
core.EnvVar:
    1 name string; 2 value string; 3 valueFrom core.EnvVarSource
core.ContainerResizePolicy:
    1 resourceName string; 2 restartPolicy string
core.VolumeMount:
    1 name string; 2 readOnly bool; 7 recursiveReadOnly string?; 3 mountPath string;
    4 subPath string; 5 mountPropagation string?; 6 subPathExpr string
core.VolumeDevice:
    1 name string; 2 devicePath string
core.Probe:
    1 - core.ProbeHandler; 2 initialDelaySeconds int32; 3 timeoutSeconds int32;
    4 periodSeconds int32; 5 successThreshold int32; 6 failureThreshold int32;
    7 terminationGracePeriodSeconds int64?
core.Lifecycle:
    1 postStart core.LifecycleHandler; 2 preStop core.LifecycleHandler
core.SecurityContext:
    1 capabilities core.Capabilities; 2 privileged bool?; 3 seLinuxOptions core.SELinuxOptions;
    10 windowsOptions core.WindowsSecurityContextOptions; 4 runAsUser int64?; 8 runAsGroup int64?;
    5 runAsNonRoot bool?; 6 readOnlyRootFilesystem bool?; 7 allowPrivilegeEscalation bool?;
    9 procMount string?; 11 seccompProfile core.SeccompProfile;
    12 appArmorProfile core.AppArmorProfile
core.EphemeralContainerCommon:
    = core.Container
core.SELinuxOptions:
    1 user string; 2 role string; 3 type string; 4 level string
core.WindowsSecurityContextOptions:
    1 gmsaCredentialSpecName string?; 2 gmsaCredentialSpec string?; 3 runAsUserName string?;
    4 hostProcess bool?
core.Sysctl:
    1 name string; 2 value string?
core.SeccompProfile:
    1 type string; 2 localhostProfile string?
core.AppArmorProfile:
    1 type string; 2 localhostProfile string?
core.NodeAffinity:
    1 requiredDuringSchedulingIgnoredDuringExecution core.NodeSelector;
    2 preferredDuringSchedulingIgnoredDuringExecution []core.PreferredSchedulingTerm
core.PodAffinity:
    1 requiredDuringSchedulingIgnoredDuringExecution []core.PodAffinityTerm;
    2 preferredDuringSchedulingIgnoredDuringExecution []core.WeightedPodAffinityTerm
core.PodAntiAffinity:
    1 requiredDuringSchedulingIgnoredDuringExecution []core.PodAffinityTerm;
    2 preferredDuringSchedulingIgnoredDuringExecution []core.WeightedPodAffinityTerm
core.PodDNSConfigOption:
    1 name string; 2 value string?
core.ResourceClaim:
    1 name string; 2 request string
core.ContainerState:
    1 waiting core.ContainerStateWaiting; 2 running core.ContainerStateRunning;
    3 terminated core.ContainerStateTerminated
core.VolumeMountStatus:
    1 name string; 2 mountPath string; 3 readOnly bool; 4 recursiveReadOnly string?
core.ContainerUser:
    1 linux core.LinuxContainerUser
core.ResourceStatus:
    1 name string; 2 resources []core.ResourceHealth
batch.PodFailurePolicyRule:
    1 action string; 2 onExitCodes batch.PodFailurePolicyOnExitCodesRequirement;
    3 onPodConditions []batch.PodFailurePolicyOnPodConditionsPattern
batch.SuccessPolicyRule:
    1 succeededIndexes string?; 2 succeededCount int32?
meta.LabelSelectorRequirement:
    1 key string; 2 operator string; 3 values []string
core.ScopedResourceSelectorRequirement:
    1 scopeName string; 2 operator string; 3 values []string
core.ClientIPConfig:
    1 timeoutSeconds int32?
core.LoadBalancerIngress:
    1 ip string; 2 hostname string; 3 ipMode string?; 4 ports []core.PortStatus
apps.RollingUpdateDeployment:
    1 maxUnavailable intstr.IntOrString?; 2 maxSurge intstr.IntOrString?
core.HostPathVolumeSource:
    1 path string; 2 type string?
core.EmptyDirVolumeSource:
    1 medium string; 2 sizeLimit resource.Quantity?
core.GCEPersistentDiskVolumeSource:
    1 pdName string; 2 fsType string; 3 partition int32; 4 readOnly bool
core.AWSElasticBlockStoreVolumeSource:
    1 volumeID string; 2 fsType string; 3 partition int32; 4 readOnly bool
core.GitRepoVolumeSource:
    1 repository string; 2 revision string; 3 directory string
core.SecretVolumeSource:
    1 secretName string; 2 items []core.KeyToPath; 3 defaultMode int32?; 4 optional bool?
core.NFSVolumeSource:
    1 server string; 2 path string; 3 readOnly bool
core.ISCSIVolumeSource:
    1 targetPortal string; 2 iqn string; 3 lun int32; 4 iscsiInterface string; 5 fsType string;
    6 readOnly bool; 7 portals []string; 8 chapAuthDiscovery bool; 11 chapAuthSession bool;
    10 secretRef core.LocalObjectReference; 12 initiatorName string?
core.GlusterfsVolumeSource:
    1 endpoints string; 2 path string; 3 readOnly bool
core.PersistentVolumeClaimVolumeSource:
    1 claimName string; 2 readOnly bool
core.RBDVolumeSource:
    1 monitors []string; 2 image string; 3 fsType string; 4 pool string; 5 user string;
    6 keyring string; 7 secretRef core.LocalObjectReference; 8 readOnly bool
core.FlexVolumeSource:
    1 driver string; 2 fsType string; 3 secretRef core.LocalObjectReference; 4 readOnly bool;
    5 options {}string
core.CinderVolumeSource:
    1 volumeID string; 2 fsType string; 3 readOnly bool; 4 secretRef core.LocalObjectReference
core.CephFSVolumeSource:
    1 monitors []string; 2 path string; 3 user string; 4 secretFile string;
    5 secretRef core.LocalObjectReference; 6 readOnly bool
core.FlockerVolumeSource:
    1 datasetName string; 2 datasetUUID string
core.DownwardAPIVolumeSource:
    1 items []core.DownwardAPIVolumeFile; 2 defaultMode int32?
core.FCVolumeSource:
    1 targetWWNs []string; 2 lun int32?; 3 fsType string; 4 readOnly bool; 5 wwids []string
core.AzureFileVolumeSource:
    1 secretName string; 2 shareName string; 3 readOnly bool
core.ConfigMapVolumeSource:
    1 - core.LocalObjectReference; 2 items []core.KeyToPath; 3 defaultMode int32?;
    4 optional bool?
core.VsphereVirtualDiskVolumeSource:
    1 volumePath string; 2 fsType string; 3 storagePolicyName string; 4 storagePolicyID string
core.QuobyteVolumeSource:
    1 registry string; 2 volume string; 3 readOnly bool; 4 user string; 5 group string;
    6 tenant string
core.AzureDiskVolumeSource:
    1 diskName string; 2 diskURI string; 3 cachingMode string?; 4 fsType string?; 5 readOnly bool?;
    6 kind string?
core.PhotonPersistentDiskVolumeSource:
    1 pdID string; 2 fsType string
core.ProjectedVolumeSource:
    1 sources []core.VolumeProjection; 2 defaultMode int32?
core.PortworxVolumeSource:
    1 volumeID string; 2 fsType string; 3 readOnly bool
core.ScaleIOVolumeSource:
    1 gateway string; 2 system string; 3 secretRef core.LocalObjectReference; 4 sslEnabled bool;
    5 protectionDomain string; 6 storagePool string; 7 storageMode string; 8 volumeName string;
    9 fsType string; 10 readOnly bool
core.StorageOSVolumeSource:
    1 volumeName string; 2 volumeNamespace string; 3 fsType string; 4 readOnly bool;
    5 secretRef core.LocalObjectReference
core.CSIVolumeSource:
    1 driver string; 2 readOnly bool?; 3 fsType string?; 4 volumeAttributes {}string;
    5 nodePublishSecretRef core.LocalObjectReference
core.EphemeralVolumeSource:
    1 volumeClaimTemplate core.PersistentVolumeClaimTemplate
core.ImageVolumeSource:
    1 reference string; 2 pullPolicy string
core.ConfigMapEnvSource:
    1 - core.LocalObjectReference; 2 optional bool?
core.SecretEnvSource:
    1 - core.LocalObjectReference; 2 optional bool?
core.EnvVarSource:
    1 fieldRef core.ObjectFieldSelector; 2 resourceFieldRef core.ResourceFieldSelector;
    3 configMapKeyRef core.ConfigMapKeySelector; 4 secretKeyRef core.SecretKeySelector
core.ProbeHandler:
    1 exec core.ExecAction; 2 httpGet core.HTTPGetAction; 3 tcpSocket core.TCPSocketAction;
    4 grpc core.GRPCAction
core.LifecycleHandler:
    1 exec core.ExecAction; 2 httpGet core.HTTPGetAction; 3 tcpSocket core.TCPSocketAction;
    4 sleep core.SleepAction
core.Capabilities:
    1 add []string; 2 drop []string
core.NodeSelector:
    1 nodeSelectorTerms []core.NodeSelectorTerm
core.PreferredSchedulingTerm:
    1 weight int32; 2 preference core.NodeSelectorTerm
core.PodAffinityTerm:
    1 labelSelector meta.LabelSelector; 2 namespaces []string; 3 topologyKey string;
    4 namespaceSelector meta.LabelSelector; 5 matchLabelKeys []string;
    6 mismatchLabelKeys []string
core.WeightedPodAffinityTerm:
    1 weight int32; 2 podAffinityTerm core.PodAffinityTerm
core.ContainerStateWaiting:
    1 reason string; 2 message string
core.ContainerStateRunning:
    1 startedAt meta.Time
core.ContainerStateTerminated:
    1 exitCode int32?; 2 signal int32; 3 reason string; 4 message string; 5 startedAt meta.Time;
    6 finishedAt meta.Time; 7 containerID string
core.LinuxContainerUser:
    1 uid int64?; 2 gid int64?; 3 supplementalGroups []int64
core.ResourceHealth:
    1 resourceID string; 2 health string
batch.PodFailurePolicyOnExitCodesRequirement:
    1 containerName string?; 2 operator string; 3 values []int32
batch.PodFailurePolicyOnPodConditionsPattern:
    1 type string; 2 status string
core.PortStatus:
    1 port int32?; 2 protocol string; 3 error string?
core.KeyToPath:
    1 key string; 2 path string; 3 mode int32?
core.DownwardAPIVolumeFile:
    1 path string; 2 fieldRef core.ObjectFieldSelector;
    3 resourceFieldRef core.ResourceFieldSelector; 4 mode int32?
core.VolumeProjection:
    1 secret core.SecretProjection; 2 downwardAPI core.DownwardAPIProjection;
    3 configMap core.ConfigMapProjection; 4 serviceAccountToken core.ServiceAccountTokenProjection;
    5 clusterTrustBundle core.ClusterTrustBundleProjection
core.PersistentVolumeClaimTemplate:
    1 metadata meta.ObjectMeta; 2 spec core.PersistentVolumeClaimSpec
core.ObjectFieldSelector:
    1 apiVersion string; 2 fieldPath string
core.ResourceFieldSelector:
    1 containerName string; 2 resource string; 3 divisor resource.Quantity
core.ConfigMapKeySelector:
    1 - core.LocalObjectReference; 2 key string; 3 optional bool?
core.SecretKeySelector:
    1 - core.LocalObjectReference; 2 key string; 3 optional bool?
core.ExecAction:
    1 command []string
core.HTTPGetAction:
    1 path string; 2 port intstr.IntOrString; 3 host string; 4 scheme string;
    5 httpHeaders []core.HTTPHeader
core.TCPSocketAction:
    1 port intstr.IntOrString; 2 host string
core.GRPCAction:
    1 port int32; 2 service string?
core.SleepAction:
    1 seconds int64?
core.NodeSelectorTerm:
    1 matchExpressions []core.NodeSelectorRequirement;
    2 matchFields []core.NodeSelectorRequirement
core.SecretProjection:
    1 - core.LocalObjectReference; 2 items []core.KeyToPath; 4 optional bool?
core.DownwardAPIProjection:
    1 items []core.DownwardAPIVolumeFile
core.ConfigMapProjection:
    1 - core.LocalObjectReference; 2 items []core.KeyToPath; 4 optional bool?
core.ServiceAccountTokenProjection:
    1 audience string; 2 expirationSeconds int64?; 3 path string
core.ClusterTrustBundleProjection:
    1 name string?; 2 signerName string?; 3 labelSelector meta.LabelSelector; 5 optional bool?;
    4 path string
core.PersistentVolumeClaimSpec:
    1 accessModes []string; 4 selector meta.LabelSelector;
    2 resources core.VolumeResourceRequirements; 3 volumeName string; 5 storageClassName string?;
    6 volumeMode string?; 7 dataSource core.TypedLocalObjectReference;
    8 dataSourceRef core.TypedObjectReference; 9 volumeAttributesClassName string?
core.HTTPHeader:
    1 name string; 2 value string?
core.NodeSelectorRequirement:
    1 key string; 2 operator string; 3 values []string
core.VolumeResourceRequirements:
    1 limits {}resource.Quantity; 2 requests {}resource.Quantity
core.TypedLocalObjectReference:
    1 apiGroup string?; 2 kind string; 3 name string
core.TypedObjectReference:
    1 apiGroup string?; 2 kind string; 3 name string; 4 namespace string?
"""


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: where it goes in JSON and how to read its bytes."""

    number: int
    name: str  # the JSON key, or "" for a struct embedded inline
    type: str  # a scalar, a special type or a message of MESSAGES
    repeated: bool = False
    map: bool = False  # map<string, type>
    keep_zero: bool = False
    where: str = ""  # "core.PodSpec.containers", for error messages

    @property
    def message(self) -> bool:
        return self.type not in SCALARS


@dataclass(frozen=True, slots=True)
class Message:
    name: str
    fields: dict[int, Field]


_FIELD = re.compile(r"^(\d+) (\S+) (\[\]|\{\})?([\w.]+)(\?)?$")


def parse(schema: str) -> dict[str, Message]:
    """Read the compact table; a typo fails at import, not on the first request that needs it."""
    messages: dict[str, Message] = {}
    copies: dict[str, str] = {}
    for entry in re.split(r"\n(?=\S)", schema.strip()):
        name, _, body = entry.partition(":")
        if body.strip().startswith("="):
            copies[name] = body.strip()[1:].strip()
            continue
        fields: dict[int, Field] = {}
        for text in body.replace("\n", " ").split(";"):
            match = _FIELD.match(" ".join(text.split()))
            if match is None:
                raise ValueError(f"{name}: cannot read field {text.strip()!r}")
            number, key, shape, type_, keep = match.groups()
            inline = key == "-"
            fields[int(number)] = Field(
                int(number),
                "" if inline else key,
                type_,
                shape == "[]",
                shape == "{}",
                keep == "?",
                f"{name}.{type_ if inline else key}",
            )
        messages[name] = Message(name, fields)
    for name, original in copies.items():
        if original not in messages:
            raise ValueError(f"{name}: no table for {original}")
        fields = {
            number: replace(field, where=name + field.where[len(original) :])
            for number, field in messages[original].fields.items()
        }
        messages[name] = Message(name, fields)
    for message in messages.values():
        for field in message.fields.values():
            if field.type not in SCALARS and field.type not in SPECIAL and field.type not in messages:
                raise ValueError(f"{message.name}.{field.name}: no table for {field.type}")
    return messages


MESSAGES: dict[str, Message] = parse(SCHEMA)
