package gcpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The JSON of the Compute Engine v1 resources, as far as emulated. Field
// names are the API's; 64-bit integers are strings, as in the API.

type wireError struct {
	Error wireErrorBody `json:"error"`
}

type wireErrorBody struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Errors  []wireErrorItem `json:"errors"`
}

type wireErrorItem struct {
	Message string `json:"message"`
	Domain  string `json:"domain"`
	Reason  string `json:"reason"`
}

type wireScheduling struct {
	ProvisioningModel         string `json:"provisioningModel,omitempty"`
	Preemptible               bool   `json:"preemptible"`
	AutomaticRestart          bool   `json:"automaticRestart"`
	OnHostMaintenance         string `json:"onHostMaintenance"`
	InstanceTerminationAction string `json:"instanceTerminationAction,omitempty"`
}

type wireMetadata struct {
	Kind        string             `json:"kind"`
	Fingerprint string             `json:"fingerprint"`
	Items       []wireMetadataItem `json:"items,omitempty"`
}

type wireMetadataItem struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type wireInstance struct {
	Kind              string            `json:"kind"`
	ID                string            `json:"id"`
	CreationTimestamp string            `json:"creationTimestamp"`
	Name              string            `json:"name"`
	MachineType       string            `json:"machineType"`
	Status            string            `json:"status"`
	Zone              string            `json:"zone"`
	Metadata          wireMetadata      `json:"metadata"`
	Labels            map[string]string `json:"labels,omitempty"`
	Scheduling        wireScheduling    `json:"scheduling"`
	SelfLink          string            `json:"selfLink"`
}

type wireScopedInstances struct {
	Instances []wireInstance `json:"instances,omitempty"`
	Warning   *wireWarning   `json:"warning,omitempty"`
}

type wireWarning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type wireInstanceAggregatedList struct {
	Kind          string                         `json:"kind"`
	ID            string                         `json:"id"`
	Items         map[string]wireScopedInstances `json:"items"`
	NextPageToken string                         `json:"nextPageToken,omitempty"`
	SelfLink      string                         `json:"selfLink"`
}

type wireInstanceList struct {
	Kind          string         `json:"kind"`
	ID            string         `json:"id"`
	Items         []wireInstance `json:"items,omitempty"`
	NextPageToken string         `json:"nextPageToken,omitempty"`
	SelfLink      string         `json:"selfLink"`
}

type wireActions struct {
	Abandoning             int `json:"abandoning"`
	Creating               int `json:"creating"`
	CreatingWithoutRetries int `json:"creatingWithoutRetries"`
	Deleting               int `json:"deleting"`
	None                   int `json:"none"`
	Recreating             int `json:"recreating"`
	Refreshing             int `json:"refreshing"`
	Restarting             int `json:"restarting"`
	Verifying              int `json:"verifying"`
}

type wireGroupStatus struct {
	IsStable bool `json:"isStable"`
}

type wireZone struct {
	Zone string `json:"zone"`
}

type wireDistributionPolicy struct {
	Zones       []wireZone `json:"zones"`
	TargetShape string     `json:"targetShape"`
}

type wireGroup struct {
	Kind               string                  `json:"kind"`
	ID                 string                  `json:"id"`
	CreationTimestamp  string                  `json:"creationTimestamp"`
	Name               string                  `json:"name"`
	Zone               string                  `json:"zone,omitempty"`
	Region             string                  `json:"region,omitempty"`
	DistributionPolicy *wireDistributionPolicy `json:"distributionPolicy,omitempty"`
	InstanceTemplate   string                  `json:"instanceTemplate"`
	InstanceGroup      string                  `json:"instanceGroup"`
	BaseInstanceName   string                  `json:"baseInstanceName"`
	Fingerprint        string                  `json:"fingerprint"`
	CurrentActions     wireActions             `json:"currentActions"`
	Status             wireGroupStatus         `json:"status"`
	TargetSize         int32                   `json:"targetSize"`
	SelfLink           string                  `json:"selfLink"`
}

type wireScopedGroups struct {
	InstanceGroupManagers []wireGroup  `json:"instanceGroupManagers,omitempty"`
	Warning               *wireWarning `json:"warning,omitempty"`
}

type wireGroupAggregatedList struct {
	Kind          string                      `json:"kind"`
	ID            string                      `json:"id"`
	Items         map[string]wireScopedGroups `json:"items"`
	NextPageToken string                      `json:"nextPageToken,omitempty"`
	SelfLink      string                      `json:"selfLink"`
}

type wireOpErrors struct {
	Errors []wireOpError `json:"errors"`
}

type wireOpError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type wireLastAttempt struct {
	Errors *wireOpErrors `json:"errors,omitempty"`
}

type wireManagedInstance struct {
	Instance       string           `json:"instance"`
	ID             string           `json:"id,omitempty"`
	Name           string           `json:"name"`
	InstanceStatus string           `json:"instanceStatus,omitempty"`
	CurrentAction  string           `json:"currentAction"`
	LastAttempt    *wireLastAttempt `json:"lastAttempt,omitempty"`
}

type wireManagedInstances struct {
	ManagedInstances []wireManagedInstance `json:"managedInstances,omitempty"`
	NextPageToken    string                `json:"nextPageToken,omitempty"`
}

type wireTemplateProperties struct {
	MachineType       string                  `json:"machineType"`
	Scheduling        wireScheduling          `json:"scheduling"`
	Labels            map[string]string       `json:"labels,omitempty"`
	Metadata          wireMetadata            `json:"metadata"`
	GuestAccelerators []wireAcceleratorConfig `json:"guestAccelerators,omitempty"`
}

// wireAcceleratorConfig is an instance's (or template's) attached GPUs.
type wireAcceleratorConfig struct {
	AcceleratorType  string `json:"acceleratorType"`
	AcceleratorCount int32  `json:"acceleratorCount"`
}

// wireMachineAccelerator is a machine type's built-in GPUs.
type wireMachineAccelerator struct {
	GuestAcceleratorType  string `json:"guestAcceleratorType"`
	GuestAcceleratorCount int32  `json:"guestAcceleratorCount"`
}

type wireTemplate struct {
	Kind              string                 `json:"kind"`
	ID                string                 `json:"id"`
	CreationTimestamp string                 `json:"creationTimestamp"`
	Name              string                 `json:"name"`
	Region            string                 `json:"region,omitempty"`
	Properties        wireTemplateProperties `json:"properties"`
	SelfLink          string                 `json:"selfLink"`
}

type wireMachineType struct {
	Kind        string `json:"kind"`
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	GuestCpus   int32  `json:"guestCpus"`
	MemoryMb    int32  `json:"memoryMb"`
	IsSharedCPU bool   `json:"isSharedCpu"`
	Zone        string `json:"zone"`
	SelfLink    string `json:"selfLink"`
	// Architecture is X86_64 or ARM64.
	Architecture string                   `json:"architecture"`
	Accelerators []wireMachineAccelerator `json:"accelerators,omitempty"`
}

type wireOperation struct {
	Kind                string        `json:"kind"`
	ID                  string        `json:"id"`
	Name                string        `json:"name"`
	Zone                string        `json:"zone,omitempty"`
	Region              string        `json:"region,omitempty"`
	OperationType       string        `json:"operationType"`
	TargetLink          string        `json:"targetLink"`
	TargetID            string        `json:"targetId"`
	Status              string        `json:"status"`
	User                string        `json:"user"`
	Progress            int           `json:"progress"`
	InsertTime          string        `json:"insertTime"`
	StartTime           string        `json:"startTime"`
	EndTime             string        `json:"endTime,omitempty"`
	Error               *wireOpErrors `json:"error,omitempty"`
	HTTPErrorStatusCode int           `json:"httpErrorStatusCode,omitempty"`
	HTTPErrorMessage    string        `json:"httpErrorMessage,omitempty"`
	SelfLink            string        `json:"selfLink"`
}

// operation is a long-running operation of the emulated API.
type operation struct {
	path, name, scope, opType, target string
	id, targetID                      uint64
	insert, doneAt, endTime           time.Time
	done                              bool
	err                               *OperationError
	// effect applies the write; run once, when the operation is DONE and
	// did not fail.
	effect func(now time.Time)
}

// base is the API root of a request, http://host/compute/v1/, which
// selfLinks start with.
func base(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/compute/v1/"
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000-07:00") }

func id(n uint64) string { return strconv.FormatUint(n, 10) }

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
}

func writeError(w http.ResponseWriter, err *APIError, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	domain := "global"
	if err.Code == http.StatusTooManyRequests || strings.Contains(err.Reason, "RateLimit") || strings.Contains(err.Reason, "rateLimit") {
		domain = "usageLimits"
	}
	writeJSON(w, err.Code, wireError{Error: wireErrorBody{Code: err.Code, Message: err.Message,
		Errors: []wireErrorItem{{Message: err.Message, Domain: domain, Reason: err.Reason}}}})
}

func metadataOf(items map[string]string) wireMetadata {
	md := wireMetadata{Kind: "compute#metadata", Fingerprint: "c2VlZA=="}
	for _, k := range slices.Sorted(maps.Keys(items)) {
		md.Items = append(md.Items, wireMetadataItem{Key: k, Value: items[k]})
	}
	return md
}

func schedulingOf(s Scheduling) wireScheduling {
	w := wireScheduling{ProvisioningModel: s.ProvisioningModel, Preemptible: s.Preemptible, InstanceTerminationAction: s.InstanceTerminationAction,
		AutomaticRestart: true, OnHostMaintenance: "MIGRATE"}
	if s.Preemptible || s.ProvisioningModel == ProvisioningSpot {
		w.AutomaticRestart, w.OnHostMaintenance = false, "TERMINATE"
	}
	return w
}
