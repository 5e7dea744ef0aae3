package gcpapi

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Step is one pass of the managed instance groups' control loop and of
// Compute Engine's, at the emulator clock's now:
//
//  1. Operations whose delay has passed are DONE and their effects applied.
//  2. Each group gets CREATING members up to its target size, and loses
//     those above it: members whose instance does not exist yet first,
//     then the newest (Compute Engine's own choice also weighs zones and
//     instance states; not emulated).
//  3. Each CREATING member without an instance gets one, PROVISIONING,
//     from the group's template, in its zone, unless the group or the zone
//     is short of capacity (SetCapacityShortage, SetZoneCapacityShortage):
//     then its lastAttempt records ZONE_RESOURCE_POOL_EXHAUSTED and the
//     creation is tried again at the next Step (a regional group's member
//     moves to a zone that is not short, when it has one).
//  4. Instances PROVISIONING for CreateDelay are RUNNING, their members
//     NONE; instances STOPPING for DeleteDelay are gone, with their members.
//
// OnRunning and OnDeleted hooks run after the pass, without the lock held.
func (s *Server) Step() {
	s.mu.Lock()
	now := s.clock.Now()
	s.settleOperations(now)
	var running, deleted []Instance
	for _, path := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[path]
		s.reconcileMembers(g)
		for _, m := range g.members {
			if m.action != ActionCreating && m.action != ActionRecreating {
				continue
			}
			if m.inst == nil {
				if g.Region != "" && s.zoneShortage[m.zone] {
					m.zone = s.zoneFor(g)
				}
				if s.shortage[g.Name] || s.zoneShortage[m.zone] {
					m.lastError = &OperationError{Code: CodeZoneResourcePoolExhausted, HTTPStatus: 503, Message: fmt.Sprintf(
						"The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", g.Project, m.zone)}
					continue
				}
				m.lastError = nil
				m.inst = s.createMemberInstance(g, m, now)
			}
			if m.inst.Status == StatusProvisioning && !now.Before(m.inst.readyAt) {
				m.inst.Status, m.action = StatusRunning, ActionNone
				running = append(running, m.inst.copy())
			}
		}
	}
	for _, path := range slices.Sorted(maps.Keys(s.instances)) {
		i := s.instances[path]
		if !i.deleting || now.Before(i.deleteAt) {
			continue
		}
		delete(s.instances, path)
		if g, ok := s.groups[i.Group]; ok {
			g.members = slices.DeleteFunc(g.members, func(m *member) bool { return m.inst == i })
		}
		gone := i.copy()
		gone.Status = StatusTerminated
		deleted = append(deleted, gone)
	}
	onRunning, onDeleted := slices.Clone(s.onRunning), slices.Clone(s.onDeleted)
	s.mu.Unlock()
	for _, i := range deleted {
		for _, f := range onDeleted {
			f(i)
		}
	}
	for _, i := range running {
		for _, f := range onRunning {
			f(i)
		}
	}
}

// createMemberInstance creates the instance of m from g's template, with the
// created-by and instance-template metadata Compute Engine adds; the caller
// holds s.mu.
func (s *Server) createMemberInstance(g *group, m *member, now time.Time) *instance {
	t := s.templates[g.InstanceTemplate]
	md := maps.Clone(t.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	scope := "zones/" + g.Zone
	if g.Region != "" {
		scope = "regions/" + g.Region
	}
	md["created-by"] = fmt.Sprintf("projects/%s/%s/instanceGroupManagers/%s", s.projectNumber, scope, g.Name)
	md["instance-template"] = t.Path()
	i := &instance{Instance: Instance{Project: g.Project, Zone: m.zone, Name: m.name, ID: s.nextID(), MachineType: t.MachineType,
		Status: StatusProvisioning, Scheduling: t.Scheduling, Labels: maps.Clone(t.Labels), Metadata: md, Group: g.Path(), Created: now},
		readyAt: now.Add(s.createDelay)}
	s.instances[i.Path()] = i
	return i
}

// settleOperations finishes the operations that are due; the caller holds
// s.mu.
func (s *Server) settleOperations(now time.Time) {
	for _, path := range slices.Sorted(maps.Keys(s.operations)) {
		op := s.operations[path]
		if !op.done && !now.Before(op.doneAt) {
			s.finish(op, now)
		}
	}
}

// finish marks op DONE and applies its effect unless it failed; the caller
// holds s.mu.
func (s *Server) finish(op *operation, now time.Time) {
	op.done, op.endTime = true, now
	if op.err == nil && op.effect != nil {
		op.effect(now)
	}
	op.effect = nil
}
