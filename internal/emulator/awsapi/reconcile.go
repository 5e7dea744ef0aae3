package awsapi

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// maxActivities bounds the kept scaling activities (AWS keeps six weeks).
const maxActivities = 10000

// Step is one pass of the Auto Scaling and EC2 control loops, at the
// emulator clock's now:
//
//  1. Each group with fewer Pending and InService instances than its desired
//     capacity launches the difference, one scaling activity per instance.
//     The purchase option follows the launch template's market type, or the
//     mixed instances policy's distribution (on-demand base, then the
//     percentage above it, rounded up in favour of on-demand). Zones are
//     balanced (fewest instances first); instance types are tried in
//     override order, or by current spot price for a lowest-price spot
//     allocation. When no pool has capacity (see SetCapacityShortage), one
//     Failed activity is recorded and the group tries again at the next
//     Step.
//  2. Each group with more than its desired capacity terminates the excess,
//     skipping instances protected from scale-in: from the zone with the
//     most instances, preferring the purchase option above its share, then
//     the oldest. Members that EC2 shut down get their termination activity.
//  3. Instances shutting down for TerminateDelay (none by default: at once)
//     become terminated and leave their group; terminated ones older than
//     TerminatedRetention are forgotten.
//  4. Pending instances launched LaunchDelay ago become running and
//     InService.
//
// OnTerminate and OnLaunch hooks run after the pass, without the lock held.
// Step returns how long until an instance is next due to change state on
// the clock, or 0 when none is waiting.
func (s *Server) Step() time.Duration {
	s.mu.Lock()
	now := s.clock.Now()
	var launched, terminated []Instance
	var next time.Duration
	wait := func(due time.Time) {
		if d := due.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}

	// 1 and 2. Scaling.
	for _, name := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[name]
		s.noteOutsideTerminations(g, now)
		s.scaleOut(g, now)
		s.scaleIn(g, now)
	}

	// Lifecycle hooks' waits and spot interruptions that are due.
	if due := s.stepHoldsLocked(now); !due.IsZero() {
		wait(due)
	}

	// 3. Terminations that are due.
	kept := s.instanceOrder[:0]
	for _, id := range s.instanceOrder {
		i := s.instances[id]
		switch i.State {
		case StateShuttingDown:
			if due := i.stateSince.Add(s.terminateDelay); now.Before(due) {
				wait(due)
				break
			}
			i.State, i.stateSince = StateTerminated, now
			s.emitStateLocked(i)
			if g, ok := s.groups[i.Group]; ok {
				g.members = slices.DeleteFunc(g.members, func(m string) bool { return m == id })
				i.LifecycleState = "Terminated"
			}
			s.finishActivity(id, now)
			terminated = append(terminated, i.copy())
		case StateTerminated:
			if !now.Before(i.stateSince.Add(s.terminatedRetention)) {
				delete(s.instances, id)
				continue
			}
		}
		kept = append(kept, id)
	}
	s.instanceOrder = kept

	// 4. Launches that are due.
	for _, id := range s.instanceOrder {
		i := s.instances[id]
		if i.State != StatePending {
			continue
		}
		if due := i.stateSince.Add(i.launchDelay); now.Before(due) {
			wait(due)
			continue
		}
		i.State, i.stateSince = StateRunning, now
		s.emitStateLocked(i)
		if i.Group != "" {
			i.LifecycleState = LifecycleInService
		}
		s.finishActivity(id, now)
		launched = append(launched, i.copy())
	}
	if n := len(s.activities); n > maxActivities {
		s.activities = slices.Clone(s.activities[n-maxActivities:])
	}
	onLaunch, onTerminate := slices.Clone(s.onLaunch), slices.Clone(s.onTerminate)
	s.mu.Unlock()

	for _, i := range terminated {
		for _, h := range onTerminate {
			h(i)
		}
	}
	for _, i := range launched {
		for _, h := range onLaunch {
			h(i)
		}
	}
	return next
}

// active returns the group's Pending and InService instances.
func (s *Server) active(g *group) []*instance {
	var out []*instance
	for _, id := range g.members {
		i := s.instances[id]
		if i.LifecycleState == LifecyclePending || i.LifecycleState == LifecycleInService {
			out = append(out, i)
		}
	}
	return out
}

// onDemandTarget is how many of desired instances the distribution wants
// on-demand.
func onDemandTarget(d InstancesDistribution, desired int32) int32 {
	base := min(desired, d.OnDemandBaseCapacity)
	above := desired - base
	return base + (above*d.OnDemandPercentageAboveBaseCapacity+99)/100
}

func (s *Server) scaleOut(g *group, now time.Time) {
	act := s.active(g)
	if int32(len(act)) >= g.DesiredCapacity || g.LaunchConfigurationName != "" {
		return
	}
	t := s.templateLocked(g.launchTemplateRef())
	version := t.resolveVersion(g.launchTemplateRef().Version)
	data := t.versions[version-1]
	perZone := map[string]int{}
	onDemand := int32(0)
	for _, i := range act {
		perZone[i.AvailabilityZone]++
		if !i.Spot {
			onDemand++
		}
	}
	for n := int32(len(act)); n < g.DesiredCapacity; n++ {
		spot := data.Spot
		types := []string{data.InstanceType}
		if p := g.MixedInstancesPolicy; p != nil {
			spot = onDemand >= onDemandTarget(p.InstancesDistribution, g.DesiredCapacity)
			switch {
			case len(p.InstanceTypes) > 0:
				types = slices.Clone(p.InstanceTypes)
			case p.Requirements != nil:
				arch := "x86_64"
				if a, ok := s.images[data.ImageID]; ok {
					arch = a
				}
				types = s.matchRequirements(*p.Requirements, arch)
			}
		}
		zones := slices.Clone(g.AvailabilityZones)
		sort.SliceStable(zones, func(a, b int) bool { return perZone[zones[a]] < perZone[zones[b]] })
		lowestPrice := spot && (g.MixedInstancesPolicy == nil || g.MixedInstancesPolicy.InstancesDistribution.SpotAllocationStrategy == "lowest-price")
		typ, zone, ok := "", "", false
		for _, z := range zones {
			ts := slices.Clone(types)
			if lowestPrice {
				price := func(t string) float64 {
					if p := s.currentSpotPriceLocked(t, z); p >= 0 {
						return p
					}
					return 1e18
				}
				sort.SliceStable(ts, func(a, b int) bool { return price(ts[a]) < price(ts[b]) })
			}
			for _, tt := range ts {
				left, limited := s.poolLeft[pool{tt, z, spot}]
				if !s.shortage[g.Name] && !s.poolShort[pool{tt, z, spot}] && (!limited || left > 0) {
					typ, zone, ok = tt, z, true
					break
				}
			}
			if ok {
				break
			}
		}
		if !ok {
			s.recordLaunchFailure(g, now, types[0], zones, spot, n)
			return
		}
		tags := map[string]string{}
		for k, v := range g.Tags {
			tags[k] = v
		}
		tags[GroupNameTag] = g.Name
		tags["aws:ec2launchtemplate:id"] = t.id
		tags["aws:ec2launchtemplate:version"] = fmt.Sprint(version)
		i := s.newInstanceLocked(Instance{
			InstanceType: typ, AvailabilityZone: zone, State: StatePending, Spot: spot,
			ImageID: data.ImageID, Tags: tags,
			Group: g.Name, LifecycleState: LifecyclePending, HealthStatus: "Healthy",
			ProtectedFromScaleIn: g.NewInstancesProtectedFromScaleIn,
			LaunchTemplate:       LaunchTemplateRef{ID: t.id, Name: t.name, Version: fmt.Sprint(version)},
		})
		g.members = append(g.members, i.ID)
		if left, limited := s.poolLeft[pool{typ, zone, spot}]; limited {
			s.poolLeft[pool{typ, zone, spot}] = left - 1
		}
		perZone[zone]++
		if !spot {
			onDemand++
		}
		s.addActivity(&activity{
			group:       g.Name,
			instanceID:  i.ID,
			description: "Launching a new EC2 instance: " + i.ID,
			cause: fmt.Sprintf("At %s an instance was started in response to a difference between desired and actual capacity, increasing the capacity from %d to %d.",
				now.UTC().Format(time.RFC3339), n, g.DesiredCapacity),
			details:    zoneDetails(zone),
			statusCode: "InProgress",
			start:      now,
			progress:   30,
		})
	}
}

// recordLaunchFailure records the Failed activity Auto Scaling shows when
// EC2 has no capacity. The messages are EC2's: spot launches report the
// InsufficientInstanceCapacity code, on-demand ones the zone and type.
func (s *Server) recordLaunchFailure(g *group, now time.Time, typ string, zones []string, spot bool, from int32) {
	var msg string
	if spot {
		msg = "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available that matches your request. Launching EC2 instance failed."
	} else {
		msg = fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. Launching EC2 instance failed.", typ, zones[0])
	}
	s.addActivity(&activity{
		group:       g.Name,
		description: "Launching a new EC2 instance.  Status Reason: " + msg,
		cause: fmt.Sprintf("At %s an instance was started in response to a difference between desired and actual capacity, increasing the capacity from %d to %d.",
			now.UTC().Format(time.RFC3339), from, g.DesiredCapacity),
		details:    zoneDetails(zones[0]),
		statusCode: "Failed",
		statusMsg:  msg,
		start:      now,
		end:        now,
		progress:   100,
	})
}

func (s *Server) scaleIn(g *group, now time.Time) {
	act := s.active(g)
	excess := len(act) - int(g.DesiredCapacity)
	if excess <= 0 {
		return
	}
	from := len(act)
	for ; excess > 0; excess-- {
		candidates := slices.DeleteFunc(slices.Clone(act), func(i *instance) bool { return i.ProtectedFromScaleIn })
		if len(candidates) == 0 {
			return
		}
		perZone := map[string]int{}
		onDemand := int32(0)
		for _, i := range act {
			perZone[i.AvailabilityZone]++
			if !i.Spot {
				onDemand++
			}
		}
		preferSpot := -1 // -1: no preference, 0: on-demand, 1: spot
		if p := g.MixedInstancesPolicy; p != nil {
			if onDemand > onDemandTarget(p.InstancesDistribution, g.DesiredCapacity) {
				preferSpot = 0
			} else {
				preferSpot = 1
			}
		}
		rank := func(i *instance) int {
			if preferSpot < 0 || (i.Spot == (preferSpot == 1)) {
				return 0
			}
			return 1
		}
		sort.SliceStable(candidates, func(a, b int) bool {
			x, y := candidates[a], candidates[b]
			if perZone[x.AvailabilityZone] != perZone[y.AvailabilityZone] {
				return perZone[x.AvailabilityZone] > perZone[y.AvailabilityZone]
			}
			if rank(x) != rank(y) {
				return rank(x) < rank(y)
			}
			if !x.LaunchTime.Equal(y.LaunchTime) {
				return x.LaunchTime.Before(y.LaunchTime)
			}
			return x.ID < y.ID
		})
		victim := candidates[0]
		act = slices.DeleteFunc(act, func(i *instance) bool { return i == victim })
		s.autoScalingTerminateLocked(g, victim)
		ts := now.UTC().Format(time.RFC3339)
		s.addActivity(&activity{
			group:       g.Name,
			instanceID:  victim.ID,
			description: "Terminating EC2 instance: " + victim.ID,
			cause: fmt.Sprintf("At %s an instance was taken out of service in response to a difference between desired and actual capacity, shrinking the capacity from %d to %d. At %s instance %s was selected for termination.",
				ts, from, g.DesiredCapacity, ts, victim.ID),
			details:    zoneDetails(victim.AvailabilityZone),
			statusCode: "InProgress",
			start:      now,
		})
	}
}

// noteOutsideTerminations records an activity for members that EC2 shut
// down (TerminateInstances, TerminateInstance) without one from Auto Scaling.
func (s *Server) noteOutsideTerminations(g *group, now time.Time) {
	for _, id := range g.members {
		i := s.instances[id]
		if i.LifecycleState != LifecycleTerminating {
			continue
		}
		if a := s.pendingActivity(id); a != nil && strings.HasPrefix(a.description, "Terminating") {
			continue
		}
		s.addActivity(&activity{
			group:       g.Name,
			instanceID:  id,
			description: "Terminating EC2 instance: " + id,
			cause: fmt.Sprintf("At %s an instance was taken out of service in response to an EC2 health check indicating it has been terminated or stopped.",
				i.stateSince.UTC().Format(time.RFC3339)),
			details:    zoneDetails(i.AvailabilityZone),
			statusCode: "InProgress",
			start:      now,
		})
	}
}

func zoneDetails(zone string) string {
	return fmt.Sprintf(`{"Subnet ID":"subnet-0%016x","Availability Zone":"%s"}`, len(zone)*0x1111, zone)
}

// addActivity stamps a and keeps it; the caller holds s.mu. An unfinished
// activity about an instance ends the one before it.
func (s *Server) addActivity(a *activity) {
	a.id = uuid(s.nextID() * 0x9e3779b97f4a7c15)
	s.activities = append(s.activities, a)
	if a.instanceID == "" || !a.end.IsZero() {
		return
	}
	if prev := s.open[a.instanceID]; prev != nil {
		prev.finish(a.start)
	}
	s.open[a.instanceID] = a
}

// pendingActivity returns the unfinished activity about instance id.
func (s *Server) pendingActivity(id string) *activity {
	return s.open[id]
}

// finishActivity ends the unfinished activity about instance id, if any.
func (s *Server) finishActivity(id string, now time.Time) {
	if a := s.open[id]; a != nil {
		a.finish(now)
		delete(s.open, id)
	}
}

func (a *activity) finish(now time.Time) {
	a.statusCode, a.progress, a.end = "Successful", 100, now
}
