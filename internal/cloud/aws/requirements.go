package aws

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// requirementType is the instance type EC2 matched to a group's
// attribute-based requirements, and what it was asked with.
type requirementType struct{ asked, typ string }

// typeFromRequirements returns the first instance type EC2 matches to a
// group's attribute-based requirements (GetInstanceTypesFromInstanceRequirements)
// for the architecture of its launch template's image (x86_64 when it names
// none), as the cluster autoscaler does; asked again only when the
// requirements or the image change. The attributes that bound what a node
// offers are passed (vCPUs, memory, accelerators, allowed and excluded
// types, generations, CPU makers, burstable, bare metal); the others (local
// storage, network and EBS bandwidth, price protection) are not, so the
// match may be a type Auto Scaling would not launch.
func (g *NodeGroup) typeFromRequirements(ctx context.Context) (string, error) {
	arch := ec2types.ArchitectureTypeX8664
	if g.template.key() != (launchTemplate{}).key() {
		f, err := g.p.launchTemplate(ctx, g.template)
		if err != nil {
			return "", err
		}
		if f.imageID != "" {
			if arch, err = g.p.imageArch(ctx, f.imageID); err != nil {
				return "", fmt.Errorf("the Auto Scaling group %s: %w", g.name, err)
			}
		}
	}
	req := requirementsRequest(g.requirements)
	b, _ := json.Marshal(req)
	asked := string(arch) + " " + string(b)
	g.p.mu.Lock()
	known, ok := g.p.requirementTypes[g.name]
	g.p.mu.Unlock()
	if ok && known.asked == asked {
		return known.typ, nil
	}
	resp, err := g.p.ec2.GetInstanceTypesFromInstanceRequirements(ctx, &ec2.GetInstanceTypesFromInstanceRequirementsInput{
		ArchitectureTypes: []ec2types.ArchitectureType{arch}, VirtualizationTypes: []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm},
		InstanceRequirements: req, MaxResults: aws.Int32(100)})
	if err != nil {
		return "", fmt.Errorf("the Auto Scaling group %s: matching instance types to its requirements: %w", g.name, mapError("", err))
	}
	if len(resp.InstanceTypes) == 0 || aws.ToString(resp.InstanceTypes[0].InstanceType) == "" {
		return "", fmt.Errorf("the Auto Scaling group %s: no %s instance type matches its instance requirements", g.name, arch)
	}
	typ := aws.ToString(resp.InstanceTypes[0].InstanceType)
	g.p.mu.Lock()
	g.p.requirementTypes[g.name] = requirementType{asked: asked, typ: typ}
	g.p.mu.Unlock()
	return typ, nil
}

// requirementsRequest is an Auto Scaling group's instance requirements in
// EC2's terms, for the attributes that bound what a node offers.
func requirementsRequest(r *astypes.InstanceRequirements) *ec2types.InstanceRequirementsRequest {
	out := &ec2types.InstanceRequirementsRequest{
		VCpuCount: &ec2types.VCpuCountRangeRequest{}, MemoryMiB: &ec2types.MemoryMiBRequest{},
		AllowedInstanceTypes: r.AllowedInstanceTypes, ExcludedInstanceTypes: r.ExcludedInstanceTypes,
		BurstablePerformance: ec2types.BurstablePerformance(r.BurstablePerformance), BareMetal: ec2types.BareMetal(r.BareMetal),
	}
	if r.VCpuCount != nil {
		out.VCpuCount.Min, out.VCpuCount.Max = r.VCpuCount.Min, r.VCpuCount.Max
	}
	if r.MemoryMiB != nil {
		out.MemoryMiB.Min, out.MemoryMiB.Max = r.MemoryMiB.Min, r.MemoryMiB.Max
	}
	if r.AcceleratorCount != nil {
		out.AcceleratorCount = &ec2types.AcceleratorCountRequest{Min: r.AcceleratorCount.Min, Max: r.AcceleratorCount.Max}
	}
	for _, m := range r.AcceleratorManufacturers {
		out.AcceleratorManufacturers = append(out.AcceleratorManufacturers, ec2types.AcceleratorManufacturer(m))
	}
	for _, t := range r.AcceleratorTypes {
		out.AcceleratorTypes = append(out.AcceleratorTypes, ec2types.AcceleratorType(t))
	}
	for _, gen := range r.InstanceGenerations {
		out.InstanceGenerations = append(out.InstanceGenerations, ec2types.InstanceGeneration(gen))
	}
	for _, m := range r.CpuManufacturers {
		out.CpuManufacturers = append(out.CpuManufacturers, ec2types.CpuManufacturer(m))
	}
	return out
}

// imageArch reads an image's architecture (DescribeImages), cached for
// good: an image never changes.
func (p *Provider) imageArch(ctx context.Context, id string) (ec2types.ArchitectureType, error) {
	p.mu.Lock()
	a, ok := p.images[id]
	p.mu.Unlock()
	if ok {
		return a, nil
	}
	resp, err := p.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil {
		return "", fmt.Errorf("describing image %s: %w", id, mapError("", err))
	}
	if len(resp.Images) == 0 {
		return "", fmt.Errorf("image %s: EC2 does not describe it", id)
	}
	a = ec2types.ArchitectureType(resp.Images[0].Architecture)
	p.mu.Lock()
	p.images[id] = a
	p.mu.Unlock()
	return a, nil
}
