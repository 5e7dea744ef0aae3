package azureapi

import "time"

// The JSON of the ARM compute API the emulator writes (what the SDK's
// models_serde.go reads), with the fields the emulator keeps.

type wireError struct {
	Error wireErrorBody `json:"error"`
}

type wireErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type wireList[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

type wireSKU struct {
	Name     string `json:"name"`
	Tier     string `json:"tier,omitempty"`
	Capacity *int64 `json:"capacity,omitempty"`
}

type wireBilling struct {
	MaxPrice float64 `json:"maxPrice"`
}

type wireVMProfile struct {
	OSProfile      *wireOSProfile      `json:"osProfile,omitempty"`
	NetworkProfile *wireNetworkProfile `json:"networkProfile,omitempty"`
	Priority       string              `json:"priority,omitempty"`
	EvictionPolicy string              `json:"evictionPolicy,omitempty"`
	BillingProfile *wireBilling        `json:"billingProfile,omitempty"`
}

type wireNetworkProfile struct {
	NetworkInterfaceConfigurations []wireNICConfig `json:"networkInterfaceConfigurations"`
}

type wireNICConfig struct {
	Name       string `json:"name"`
	Properties struct {
		Primary            bool           `json:"primary"`
		EnableIPForwarding bool           `json:"enableIPForwarding"`
		IPConfigurations   []wireIPConfig `json:"ipConfigurations"`
	} `json:"properties"`
}

type wireIPConfig struct {
	Name       string `json:"name"`
	Properties struct {
		Primary bool `json:"primary,omitempty"`
		Subnet  struct {
			ID string `json:"id"`
		} `json:"subnet"`
	} `json:"properties"`
}

type wireOSProfile struct {
	ComputerNamePrefix string `json:"computerNamePrefix,omitempty"`
	ComputerName       string `json:"computerName,omitempty"`
	AdminUsername      string `json:"adminUsername,omitempty"`
}

type wireScaleSet struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Zones      []string          `json:"zones,omitempty"`
	SKU        wireSKU           `json:"sku"`
	Properties wireScaleSetProps `json:"properties"`
}

type wireScaleSetProps struct {
	OrchestrationMode        string            `json:"orchestrationMode"`
	ProvisioningState        string            `json:"provisioningState"`
	UniqueID                 string            `json:"uniqueId"`
	SinglePlacementGroup     bool              `json:"singlePlacementGroup"`
	PlatformFaultDomainCount int32             `json:"platformFaultDomainCount"`
	UpgradePolicy            map[string]string `json:"upgradePolicy,omitempty"`
	VirtualMachineProfile    *wireVMProfile    `json:"virtualMachineProfile,omitempty"`
	TimeCreated              time.Time         `json:"timeCreated"`
}

type wireStatus struct {
	Code          string     `json:"code"`
	Level         string     `json:"level"`
	DisplayStatus string     `json:"displayStatus"`
	Message       string     `json:"message,omitempty"`
	Time          *time.Time `json:"time,omitempty"`
}

type wireInstanceView struct {
	ComputerName string       `json:"computerName,omitempty"`
	Statuses     []wireStatus `json:"statuses"`
}

type wireSubResource struct {
	ID string `json:"id"`
}

type wireHardware struct {
	VMSize string `json:"vmSize,omitempty"`
}

// wireVM is a Uniform scale set's VM or a virtual machine (Flexible member
// or standalone): the two share most fields.
type wireVM struct {
	ID         string      `json:"id"`
	InstanceID string      `json:"instanceId,omitempty"`
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Location   string      `json:"location"`
	Zones      []string    `json:"zones,omitempty"`
	SKU        *wireSKU    `json:"sku,omitempty"`
	Properties wireVMProps `json:"properties"`
}

type wireVMProps struct {
	VMID                   string            `json:"vmId"`
	LatestModelApplied     *bool             `json:"latestModelApplied,omitempty"`
	ProvisioningState      string            `json:"provisioningState"`
	TimeCreated            time.Time         `json:"timeCreated"`
	HardwareProfile        *wireHardware     `json:"hardwareProfile,omitempty"`
	OSProfile              *wireOSProfile    `json:"osProfile,omitempty"`
	Priority               string            `json:"priority,omitempty"`
	EvictionPolicy         string            `json:"evictionPolicy,omitempty"`
	BillingProfile         *wireBilling      `json:"billingProfile,omitempty"`
	VirtualMachineScaleSet *wireSubResource  `json:"virtualMachineScaleSet,omitempty"`
	InstanceView           *wireInstanceView `json:"instanceView,omitempty"`
}

type wireResourceSKU struct {
	ResourceType string             `json:"resourceType"`
	Name         string             `json:"name"`
	Tier         string             `json:"tier"`
	Size         string             `json:"size"`
	Family       string             `json:"family"`
	Locations    []string           `json:"locations"`
	LocationInfo []wireLocationInfo `json:"locationInfo"`
	Capabilities []wireCapability   `json:"capabilities"`
	Restrictions []any              `json:"restrictions"`
}

type wireLocationInfo struct {
	Location string   `json:"location"`
	Zones    []string `json:"zones"`
}

type wireCapability struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type wireOperation struct {
	Name      string         `json:"name"`
	Status    string         `json:"status"`
	StartTime time.Time      `json:"startTime"`
	EndTime   *time.Time     `json:"endTime,omitempty"`
	Error     *wireErrorBody `json:"error,omitempty"`
}

// wireScaleSetUpdate is the body of an update (PATCH): the emulator reads
// the capacity only.
type wireScaleSetUpdate struct {
	SKU *struct {
		Capacity *int64 `json:"capacity"`
	} `json:"sku"`
}

type wireInstanceIDs struct {
	InstanceIDs []string `json:"instanceIds"`
}
