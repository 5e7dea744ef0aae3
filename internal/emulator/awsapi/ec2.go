package awsapi

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

type handler func(*Server, query) (any, *APIError)

// ec2Actions are the emulated EC2 actions.
var ec2Actions = map[string]handler{
	"DescribeInstances":                        (*Server).describeInstances,
	"TerminateInstances":                       (*Server).terminateInstances,
	"DescribeSpotPriceHistory":                 (*Server).describeSpotPriceHistory,
	"DescribeLaunchTemplateVersions":           (*Server).describeLaunchTemplateVersions,
	"DescribeInstanceTypes":                    (*Server).describeInstanceTypes,
	"DescribeImages":                           (*Server).describeImages,
	"GetInstanceTypesFromInstanceRequirements": (*Server).typesFromRequirements,
}

// ec2Time is EC2's timestamp layout.
const ec2Time = "2006-01-02T15:04:05.000Z"

func formatTime(t time.Time) string { return t.UTC().Format(ec2Time) }

// maxInstanceIDs is the most instance IDs the emulator accepts in one
// DescribeInstances or TerminateInstances call; callers batch by it.
const maxInstanceIDs = 1000

var instanceIDPattern = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// instanceIDs reads and checks the InstanceId.N list.
func instanceIDs(q query) ([]string, *APIError) {
	ids := q.list("InstanceId")
	if len(ids) > maxInstanceIDs {
		return nil, badRequest("InvalidParameterValue", "The maximum number of instance IDs is %d, got %d", maxInstanceIDs, len(ids))
	}
	for _, id := range ids {
		if !instanceIDPattern.MatchString(id) {
			return nil, badRequest("InvalidInstanceID.Malformed", "Invalid id: %q", id)
		}
	}
	return ids, nil
}

// notFoundIDs builds EC2's error for unknown instance IDs.
func notFoundIDs(missing []string) *APIError {
	if len(missing) == 1 {
		return badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	}
	return badRequest("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
}

// maxResults reads MaxResults within [lo, hi], def when absent.
func maxResults(q query, lo, hi, def int) (int, *APIError) {
	n, ok, err := q.intParam("MaxResults")
	if err != nil {
		return 0, badRequest("InvalidParameterValue", "Invalid value '%s' for maxResults", q.get("MaxResults"))
	}
	if !ok {
		return def, nil
	}
	if n < lo {
		return 0, badRequest("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value greater than %d.", n, lo)
	}
	if n > hi {
		return 0, badRequest("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value less than %d.", n, hi)
	}
	return n, nil
}

func ec2NextToken(q query) (int, *APIError) {
	offset, ok := decodeToken(q.get("NextToken"))
	if !ok {
		return 0, badRequest("InvalidPaginationToken", "Invalid pagination token")
	}
	return offset, nil
}

// Wire types of DescribeInstances and TerminateInstances.

type ec2Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type ec2State struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type ec2StateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type ec2Placement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	GroupName        string `xml:"groupName"`
	Tenancy          string `xml:"tenancy"`
}

type ec2Instance struct {
	InstanceID            string            `xml:"instanceId"`
	ImageID               string            `xml:"imageId"`
	InstanceState         ec2State          `xml:"instanceState"`
	PrivateDNSName        string            `xml:"privateDnsName"`
	DNSName               string            `xml:"dnsName"`
	Reason                string            `xml:"reason"`
	AmiLaunchIndex        int               `xml:"amiLaunchIndex"`
	InstanceType          string            `xml:"instanceType"`
	LaunchTime            string            `xml:"launchTime"`
	Placement             ec2Placement      `xml:"placement"`
	MonitoringState       string            `xml:"monitoring>state"`
	PrivateIPAddress      string            `xml:"privateIpAddress,omitempty"`
	StateReason           *ec2StateReason   `xml:"stateReason,omitempty"`
	Architecture          string            `xml:"architecture"`
	RootDeviceType        string            `xml:"rootDeviceType"`
	RootDeviceName        string            `xml:"rootDeviceName"`
	InstanceLifecycle     string            `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string            `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string            `xml:"virtualizationType"`
	TagSet                *itemList[ec2Tag] `xml:"tagSet,omitempty"`
	Hypervisor            string            `xml:"hypervisor"`
	EbsOptimized          bool              `xml:"ebsOptimized"`
	EnaSupport            bool              `xml:"enaSupport"`
}

type ec2Reservation struct {
	ReservationID string                `xml:"reservationId"`
	OwnerID       string                `xml:"ownerId"`
	GroupSet      struct{}              `xml:"groupSet"`
	InstancesSet  itemList[ec2Instance] `xml:"instancesSet"`
}

type describeInstancesResult struct {
	ReservationSet itemList[ec2Reservation] `xml:"reservationSet"`
	NextToken      string                   `xml:"nextToken,omitempty"`
}

var stateCodes = map[string]int{StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48}

// maxFilterValues is the most filter values DescribeInstances takes in one
// call, all filters together; more is FilterLimitExceeded, as EC2 answers.
const maxFilterValues = 200

// instanceFilter returns a predicate for one DescribeInstances filter.
func instanceFilter(f filter) (func(*instance) bool, *APIError) {
	field := func(get func(*instance) string) func(*instance) bool {
		return func(i *instance) bool { return matchAny(f.values, get(i)) }
	}
	switch {
	case f.name == "instance-id":
		return field(func(i *instance) string { return i.ID }), nil
	case f.name == "instance-state-name":
		return field(func(i *instance) string { return i.State }), nil
	case f.name == "instance-state-code":
		return field(func(i *instance) string { return strconv.Itoa(stateCodes[i.State]) }), nil
	case f.name == "instance-type":
		return field(func(i *instance) string { return i.InstanceType }), nil
	case f.name == "availability-zone":
		return field(func(i *instance) string { return i.AvailabilityZone }), nil
	case f.name == "private-dns-name":
		return field(func(i *instance) string { return i.PrivateDNSName }), nil
	case f.name == "private-ip-address":
		return field(func(i *instance) string { return i.PrivateIP }), nil
	case f.name == "image-id":
		return field(func(i *instance) string { return i.ImageID }), nil
	case f.name == "instance-lifecycle":
		// On-demand instances have no lifecycle and match no value.
		return func(i *instance) bool { return i.Spot && matchAny(f.values, "spot") }, nil
	case f.name == "tag-key":
		return func(i *instance) bool {
			for k := range i.Tags {
				if matchAny(f.values, k) {
					return true
				}
			}
			return false
		}, nil
	case f.name == "tag-value":
		return func(i *instance) bool {
			for _, v := range i.Tags {
				if matchAny(f.values, v) {
					return true
				}
			}
			return false
		}, nil
	case strings.HasPrefix(f.name, "tag:"):
		key := strings.TrimPrefix(f.name, "tag:")
		return func(i *instance) bool {
			v, ok := i.Tags[key]
			return ok && matchAny(f.values, v)
		}, nil
	}
	return nil, badRequest("InvalidParameterValue", "The filter '%s' is invalid", f.name)
}

func (s *Server) describeInstances(q query) (any, *APIError) {
	ids, err := instanceIDs(q)
	if err != nil {
		return nil, err
	}
	if q.has("MaxResults") && len(ids) > 0 {
		return nil, badRequest("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	limit, err := maxResults(q, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	offset, err := ec2NextToken(q)
	if err != nil {
		return nil, err
	}
	var preds []func(*instance) bool
	values := 0
	for _, f := range q.ec2Filters() {
		p, err := instanceFilter(f)
		if err != nil {
			return nil, err
		}
		preds = append(preds, p)
		values += len(f.values)
	}
	if values > maxFilterValues {
		return nil, badRequest("FilterLimitExceeded", "The maximum number of filter values specified on a single call is %d", maxFilterValues)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// What EC2 does not show yet (SetDescribeLag).
	hidden := func(i *instance) bool {
		return s.describeLag > 0 && s.clock.Since(i.LaunchTime) < s.describeLag
	}
	want := map[string]bool{}
	var missing []string
	for _, id := range ids {
		if i, ok := s.instances[id]; !ok || hidden(i) {
			missing = append(missing, id)
		}
		want[id] = true
	}
	if len(missing) > 0 {
		return nil, notFoundIDs(missing)
	}
	var matched []*instance
	for _, id := range s.instanceOrder {
		i := s.instances[id]
		if (len(ids) > 0 && !want[id]) || hidden(i) {
			continue
		}
		if !all(preds, i) {
			continue
		}
		matched = append(matched, i)
	}
	pg, next := page(matched, offset, limit)
	out := describeInstancesResult{NextToken: next}
	for _, i := range pg {
		out.ReservationSet.Items = append(out.ReservationSet.Items, ec2Reservation{
			ReservationID: "r-" + strings.TrimPrefix(i.ID, "i-"),
			OwnerID:       s.accountID,
			InstancesSet:  itemList[ec2Instance]{Items: []ec2Instance{s.wireInstance(i)}},
		})
	}
	return out, nil
}

func all[T any](preds []func(T) bool, v T) bool {
	for _, p := range preds {
		if !p(v) {
			return false
		}
	}
	return true
}

func (s *Server) wireInstance(i *instance) ec2Instance {
	arch := s.instanceTypes[i.InstanceType].Architecture
	if arch == "" {
		arch = "x86_64"
	}
	w := ec2Instance{
		InstanceID:         i.ID,
		ImageID:            i.ImageID,
		InstanceState:      ec2State{stateCodes[i.State], i.State},
		PrivateDNSName:     i.PrivateDNSName,
		InstanceType:       i.InstanceType,
		LaunchTime:         formatTime(i.LaunchTime),
		Placement:          ec2Placement{AvailabilityZone: i.AvailabilityZone, Tenancy: "default"},
		MonitoringState:    "disabled",
		PrivateIPAddress:   i.PrivateIP,
		Architecture:       arch,
		RootDeviceType:     "ebs",
		RootDeviceName:     "/dev/xvda",
		VirtualizationType: "hvm",
		Hypervisor:         "xen",
		EnaSupport:         true,
	}
	if i.State == StateTerminated {
		w.PrivateDNSName, w.PrivateIPAddress = "", ""
	}
	if i.Spot {
		w.InstanceLifecycle = "spot"
		w.SpotInstanceRequestID = "sir-" + i.ID[len(i.ID)-8:]
	}
	if i.State == StateShuttingDown || i.State == StateTerminated {
		code, msg := i.stateReason, "User initiated shutdown"
		if code == "Server.SpotInstanceTermination" {
			msg = "Spot instance termination"
		} else {
			w.Reason = fmt.Sprintf("User initiated (%s)", i.stateSince.UTC().Format("2006-01-02 15:04:05 GMT"))
		}
		w.StateReason = &ec2StateReason{code, code + ": " + msg}
	}
	if len(i.Tags) > 0 {
		w.TagSet = &itemList[ec2Tag]{}
		for _, k := range slices.Sorted(maps.Keys(i.Tags)) {
			w.TagSet.Items = append(w.TagSet.Items, ec2Tag{k, i.Tags[k]})
		}
	}
	return w
}

type ec2StateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  ec2State `xml:"currentState"`
	PreviousState ec2State `xml:"previousState"`
}

type terminateInstancesResult struct {
	InstancesSet itemList[ec2StateChange] `xml:"instancesSet"`
}

func (s *Server) terminateInstances(q query) (any, *APIError) {
	ids, err := instanceIDs(q)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, badRequest("MissingParameter", "The request must contain the parameter InstanceId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, id := range ids {
		if _, ok := s.instances[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, notFoundIDs(missing)
	}
	var out terminateInstancesResult
	for _, id := range slices.Compact(slices.Clone(ids)) {
		i := s.instances[id]
		prev := ec2State{stateCodes[i.State], i.State}
		s.shutDownLocked(i, "Client.UserInitiatedShutdown")
		out.InstancesSet.Items = append(out.InstancesSet.Items, ec2StateChange{id, ec2State{stateCodes[i.State], i.State}, prev})
	}
	return out, nil
}

// Wire types of DescribeSpotPriceHistory.

type ec2SpotPrice struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
}

type describeSpotPriceHistoryResult struct {
	SpotPriceHistorySet itemList[ec2SpotPrice] `xml:"spotPriceHistorySet"`
	NextToken           string                 `xml:"nextToken"`
}

func parseTime(q query, key string) (time.Time, bool, *APIError) {
	v := q.get(key)
	if v == "" {
		return time.Time{}, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false, badRequest("InvalidParameterValue", "Invalid value '%s' for %s", v, key)
	}
	return t, true, nil
}

func (s *Server) describeSpotPriceHistory(q query) (any, *APIError) {
	limit, err := maxResults(q, 5, 1000, 1000)
	if err != nil {
		return nil, err
	}
	offset, err := ec2NextToken(q)
	if err != nil {
		return nil, err
	}
	start, hasStart, err := parseTime(q, "StartTime")
	if err != nil {
		return nil, err
	}
	end, hasEnd, err := parseTime(q, "EndTime")
	if err != nil {
		return nil, err
	}
	types, products, zone := q.list("InstanceType"), q.list("ProductDescription"), q.get("AvailabilityZone")
	var preds []func(SpotPrice) bool
	if len(types) > 0 {
		preds = append(preds, func(p SpotPrice) bool { return slices.Contains(types, p.InstanceType) })
	}
	if len(products) > 0 {
		preds = append(preds, func(p SpotPrice) bool { return slices.Contains(products, p.ProductDescription) })
	}
	if zone != "" {
		preds = append(preds, func(p SpotPrice) bool { return p.AvailabilityZone == zone })
	}
	for _, f := range q.ec2Filters() {
		switch f.name {
		case "instance-type":
			preds = append(preds, func(p SpotPrice) bool { return matchAny(f.values, p.InstanceType) })
		case "availability-zone":
			preds = append(preds, func(p SpotPrice) bool { return matchAny(f.values, p.AvailabilityZone) })
		case "product-description":
			preds = append(preds, func(p SpotPrice) bool { return matchAny(f.values, p.ProductDescription) })
		default:
			return nil, badRequest("InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if !hasEnd {
		end = s.clock.Now()
	}
	// Per pool, the prices changed within (start, end] and the one in
	// effect at start, as EC2 answers.
	type poolKey struct{ typ, zone, product string }
	effective := map[poolKey]SpotPrice{}
	var matched []SpotPrice
	for _, p := range s.spotPrices {
		if !all(preds, p) || p.Timestamp.After(end) {
			continue
		}
		if hasStart && !p.Timestamp.After(start) {
			k := poolKey{p.InstanceType, p.AvailabilityZone, p.ProductDescription}
			if e, ok := effective[k]; !ok || p.Timestamp.After(e.Timestamp) {
				effective[k] = p
			}
			continue
		}
		matched = append(matched, p)
	}
	for _, p := range effective {
		matched = append(matched, p)
	}
	sort.SliceStable(matched, func(a, b int) bool {
		x, y := matched[a], matched[b]
		if !x.Timestamp.Equal(y.Timestamp) {
			return x.Timestamp.After(y.Timestamp)
		}
		if x.InstanceType != y.InstanceType {
			return x.InstanceType < y.InstanceType
		}
		return x.AvailabilityZone < y.AvailabilityZone
	})
	pg, next := page(matched, offset, limit)
	out := describeSpotPriceHistoryResult{NextToken: next}
	for _, p := range pg {
		out.SpotPriceHistorySet.Items = append(out.SpotPriceHistorySet.Items, ec2SpotPrice{
			InstanceType: p.InstanceType, ProductDescription: p.ProductDescription,
			SpotPrice: strconv.FormatFloat(p.Price, 'f', 6, 64), Timestamp: formatTime(p.Timestamp),
			AvailabilityZone: p.AvailabilityZone,
		})
	}
	return out, nil
}

// Wire types of DescribeLaunchTemplateVersions.

type ec2SpotOptions struct {
	MaxPrice                     string `xml:"maxPrice,omitempty"`
	SpotInstanceType             string `xml:"spotInstanceType"`
	InstanceInterruptionBehavior string `xml:"instanceInterruptionBehavior"`
}

type ec2MarketOptions struct {
	MarketType  string          `xml:"marketType"`
	SpotOptions *ec2SpotOptions `xml:"spotOptions,omitempty"`
}

type ec2LaunchTemplateData struct {
	ImageID               string            `xml:"imageId,omitempty"`
	InstanceType          string            `xml:"instanceType,omitempty"`
	InstanceMarketOptions *ec2MarketOptions `xml:"instanceMarketOptions,omitempty"`
}

type ec2LaunchTemplateVersion struct {
	LaunchTemplateID   string                `xml:"launchTemplateId"`
	LaunchTemplateName string                `xml:"launchTemplateName"`
	VersionNumber      int64                 `xml:"versionNumber"`
	CreateTime         string                `xml:"createTime"`
	CreatedBy          string                `xml:"createdBy"`
	DefaultVersion     bool                  `xml:"defaultVersion"`
	LaunchTemplateData ec2LaunchTemplateData `xml:"launchTemplateData"`
}

type describeLaunchTemplateVersionsResult struct {
	LaunchTemplateVersionSet itemList[ec2LaunchTemplateVersion] `xml:"launchTemplateVersionSet"`
	NextToken                string                             `xml:"nextToken,omitempty"`
}

func (s *Server) describeLaunchTemplateVersions(q query) (any, *APIError) {
	limit, err := maxResults(q, 1, 200, 0)
	if err != nil {
		return nil, err
	}
	offset, err := ec2NextToken(q)
	if err != nil {
		return nil, err
	}
	if len(q.ec2Filters()) > 0 {
		return nil, badRequest("InvalidParameterValue", "Filters are not supported by this emulator")
	}
	id, name, versions := q.get("LaunchTemplateId"), q.get("LaunchTemplateName"), q.list("LaunchTemplateVersion")
	if id != "" && name != "" {
		return nil, badRequest("InvalidParameterCombination", "The parameters launchTemplateId and launchTemplateName cannot be used together")
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var templates []*launchTemplate
	switch {
	case id != "":
		t, ok := s.templates[id]
		if !ok {
			if !strings.HasPrefix(id, "lt-") {
				return nil, badRequest("InvalidLaunchTemplateId.Malformed", "The specified ID for the launch template (%s) is not valid.", id)
			}
			return nil, badRequest("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
		templates = append(templates, t)
	case name != "":
		t := s.templateLocked(LaunchTemplateRef{Name: name})
		if t == nil {
			return nil, badRequest("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
		templates = append(templates, t)
	default:
		// Without a template, EC2 describes $Latest or $Default of every one.
		for _, v := range versions {
			if v != "$Latest" && v != "$Default" {
				return nil, badRequest("InvalidParameterCombination", "A launch template ID or name is required to describe version %s", v)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.templates)) {
			templates = append(templates, s.templates[k])
		}
	}
	minV, maxV := int64(0), int64(1<<62)
	if v := q.get("MinVersion"); v != "" {
		minV, _ = strconv.ParseInt(v, 10, 64)
	}
	if v := q.get("MaxVersion"); v != "" {
		maxV, _ = strconv.ParseInt(v, 10, 64)
	}
	var out []ec2LaunchTemplateVersion
	for _, t := range templates {
		var nums []int64
		if len(versions) == 0 {
			for n := int64(len(t.versions)); n >= 1; n-- {
				nums = append(nums, n)
			}
		}
		for _, v := range versions {
			n := t.resolveVersion(v)
			if n == 0 {
				return nil, badRequest("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for launch template %s.", v, t.id)
			}
			if !slices.Contains(nums, n) {
				nums = append(nums, n)
			}
		}
		for _, n := range nums {
			if n < minV || n > maxV {
				continue
			}
			out = append(out, s.wireLaunchTemplateVersion(t, n))
		}
	}
	pg, next := page(out, offset, limit)
	return describeLaunchTemplateVersionsResult{LaunchTemplateVersionSet: itemList[ec2LaunchTemplateVersion]{pg}, NextToken: next}, nil
}

func (s *Server) wireLaunchTemplateVersion(t *launchTemplate, n int64) ec2LaunchTemplateVersion {
	d := t.versions[n-1]
	data := ec2LaunchTemplateData{ImageID: d.ImageID, InstanceType: d.InstanceType}
	if d.Spot {
		data.InstanceMarketOptions = &ec2MarketOptions{MarketType: "spot", SpotOptions: &ec2SpotOptions{
			MaxPrice: d.SpotMaxPrice, SpotInstanceType: "one-time", InstanceInterruptionBehavior: "terminate",
		}}
	}
	return ec2LaunchTemplateVersion{
		LaunchTemplateID: t.id, LaunchTemplateName: t.name, VersionNumber: n,
		CreateTime: formatTime(t.created), CreatedBy: fmt.Sprintf("arn:aws:iam::%s:root", s.accountID),
		DefaultVersion: n == t.defaultVersion, LaunchTemplateData: data,
	}
}

// Wire types of DescribeInstanceTypes.

type ec2GPU struct {
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
	Count        int32  `xml:"count"`
}

type ec2InstanceTypeInfo struct {
	InstanceType           string            `xml:"instanceType"`
	CurrentGeneration      bool              `xml:"currentGeneration"`
	SupportedUsageClasses  itemList[string]  `xml:"supportedUsageClasses"`
	BareMetal              bool              `xml:"bareMetal"`
	Hypervisor             string            `xml:"hypervisor"`
	SupportedArchitectures itemList[string]  `xml:"processorInfo>supportedArchitectures"`
	DefaultVCpus           int32             `xml:"vCpuInfo>defaultVCpus"`
	DefaultCores           int32             `xml:"vCpuInfo>defaultCores"`
	DefaultThreadsPerCore  int32             `xml:"vCpuInfo>defaultThreadsPerCore"`
	MemorySizeInMiB        int64             `xml:"memoryInfo>sizeInMiB"`
	GPUs                   *itemList[ec2GPU] `xml:"gpuInfo>gpus,omitempty"`
	Network                *ec2NetworkInfo   `xml:"networkInfo,omitempty"`
}

type ec2NetworkInfo struct {
	MaximumNetworkInterfaces  int32 `xml:"maximumNetworkInterfaces"`
	Ipv4AddressesPerInterface int32 `xml:"ipv4AddressesPerInterface"`
}

type describeInstanceTypesResult struct {
	InstanceTypeSet itemList[ec2InstanceTypeInfo] `xml:"instanceTypeSet"`
	NextToken       string                        `xml:"nextToken,omitempty"`
}

func (s *Server) describeInstanceTypes(q query) (any, *APIError) {
	limit, err := maxResults(q, 5, 100, 100)
	if err != nil {
		return nil, err
	}
	offset, err := ec2NextToken(q)
	if err != nil {
		return nil, err
	}
	names := q.list("InstanceType")
	if len(names) > 100 {
		return nil, badRequest("InvalidParameterValue", "The maximum number of instance types is 100, got %d", len(names))
	}
	var preds []func(InstanceTypeInfo) bool
	for _, f := range q.ec2Filters() {
		switch f.name {
		case "instance-type":
			preds = append(preds, func(t InstanceTypeInfo) bool { return matchAny(f.values, t.Name) })
		case "vcpu-info.default-vcpus":
			preds = append(preds, func(t InstanceTypeInfo) bool { return matchAny(f.values, strconv.Itoa(int(t.VCPUs))) })
		case "memory-info.size-in-mib":
			preds = append(preds, func(t InstanceTypeInfo) bool { return matchAny(f.values, strconv.FormatInt(t.MemoryMiB, 10)) })
		case "processor-info.supported-architecture":
			preds = append(preds, func(t InstanceTypeInfo) bool { return matchAny(f.values, archOf(t)) })
		default:
			return nil, badRequest("InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, n := range names {
		if _, ok := s.instanceTypes[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, badRequest("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	var matched []InstanceTypeInfo
	for _, n := range slices.Sorted(maps.Keys(s.instanceTypes)) {
		t := s.instanceTypes[n]
		if (len(names) == 0 || slices.Contains(names, n)) && all(preds, t) {
			matched = append(matched, t)
		}
	}
	pg, next := page(matched, offset, limit)
	out := describeInstanceTypesResult{NextToken: next}
	for _, t := range pg {
		w := ec2InstanceTypeInfo{
			InstanceType: t.Name, CurrentGeneration: true,
			SupportedUsageClasses:  itemList[string]{[]string{"on-demand", "spot"}},
			Hypervisor:             "nitro",
			SupportedArchitectures: itemList[string]{[]string{archOf(t)}},
			DefaultVCpus:           t.VCPUs, DefaultCores: max(1, t.VCPUs/2), DefaultThreadsPerCore: min(2, t.VCPUs),
			MemorySizeInMiB: t.MemoryMiB,
		}
		if t.GPUs > 0 {
			w.GPUs = &itemList[ec2GPU]{[]ec2GPU{{t.GPUName, t.GPUMaker, t.GPUs}}}
		}
		if t.ENIs > 0 {
			w.Network = &ec2NetworkInfo{MaximumNetworkInterfaces: t.ENIs, Ipv4AddressesPerInterface: t.IPv4PerENI}
		}
		out.InstanceTypeSet.Items = append(out.InstanceTypeSet.Items, w)
	}
	return out, nil
}

func archOf(t InstanceTypeInfo) string {
	if t.Architecture == "" {
		return "x86_64"
	}
	return t.Architecture
}

// Wire types of GetInstanceTypesFromInstanceRequirements and DescribeImages.

type ec2InstanceTypeItem struct {
	InstanceType string `xml:"instanceType"`
}

type typesFromRequirementsResult struct {
	InstanceTypeSet itemList[ec2InstanceTypeItem] `xml:"instanceTypeSet"`
}

// typesFromRequirements serves GetInstanceTypesFromInstanceRequirements for
// one architecture and the vCPU and memory ranges (required by EC2), with
// AllowedInstanceType and ExcludedInstanceType; other attributes are
// refused rather than ignored.
func (s *Server) typesFromRequirements(q query) (any, *APIError) {
	archs := q.list("ArchitectureType")
	if len(archs) != 1 || len(q.list("VirtualizationType")) == 0 {
		return nil, badRequest("InvalidParameterValue", "The emulator takes one ArchitectureType and a VirtualizationType, got %v", archs)
	}
	const pre = "InstanceRequirements."
	if !q.has(pre+"VCpuCount.Min") || !q.has(pre+"MemoryMiB.Min") {
		return nil, badRequest("MissingParameter", "The request must contain the parameters InstanceRequirements.VCpuCount and InstanceRequirements.MemoryMiB")
	}
	num := func(key string) (int64, *APIError) {
		v, ok, err := q.intParam(pre + key)
		if err != nil {
			return 0, badRequest("InvalidParameterValue", "Invalid value '%s' for %s", q.get(pre+key), key)
		}
		if !ok {
			return 0, nil
		}
		return int64(v), nil
	}
	var r InstanceRequirements
	var lo, hi int64
	var err *APIError
	if lo, err = num("VCpuCount.Min"); err != nil {
		return nil, err
	}
	if hi, err = num("VCpuCount.Max"); err != nil {
		return nil, err
	}
	r.VCPUMin, r.VCPUMax = int32(lo), int32(hi)
	if r.MemoryMiBMin, err = num("MemoryMiB.Min"); err != nil {
		return nil, err
	}
	if r.MemoryMiBMax, err = num("MemoryMiB.Max"); err != nil {
		return nil, err
	}
	allowed, excluded := q.list(pre+"AllowedInstanceType"), q.list(pre+"ExcludedInstanceType")
	for k := range q {
		if !strings.HasPrefix(k, pre) {
			continue
		}
		switch rest := strings.TrimPrefix(k, pre); {
		case strings.HasPrefix(rest, "VCpuCount."), strings.HasPrefix(rest, "MemoryMiB."), strings.HasPrefix(rest, "AllowedInstanceType."),
			strings.HasPrefix(rest, "ExcludedInstanceType."):
		default:
			return nil, badRequest("InvalidParameterValue", "The emulator does not match instance requirement %s", rest)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out typesFromRequirementsResult
	for _, name := range s.matchRequirements(r, archs[0]) {
		if (len(allowed) == 0 || slices.Contains(allowed, name)) && !slices.Contains(excluded, name) {
			out.InstanceTypeSet.Items = append(out.InstanceTypeSet.Items, ec2InstanceTypeItem{name})
		}
	}
	return out, nil
}

type ec2Image struct {
	ImageID      string `xml:"imageId"`
	Architecture string `xml:"architecture"`
	ImageState   string `xml:"imageState"`
}

type describeImagesResult struct {
	ImagesSet itemList[ec2Image] `xml:"imagesSet"`
}

// describeImages serves DescribeImages by ImageId.N for the images added
// with AddImage.
func (s *Server) describeImages(q query) (any, *APIError) {
	ids := q.list("ImageId")
	s.mu.Lock()
	defer s.mu.Unlock()
	var out describeImagesResult
	for _, id := range ids {
		arch, ok := s.images[id]
		if !ok {
			return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
		out.ImagesSet.Items = append(out.ImagesSet.Items, ec2Image{ImageID: id, Architecture: arch, ImageState: "available"})
	}
	return out, nil
}
