package reaper

import (
	"context"
	"fmt"
	"sync"
)

// Registry maps session ids to sessions. It is safe for concurrent use.
type Registry struct {
	// mu guards the field that follows.
	mu       sync.Mutex
	sessions map[string]*Session
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{sessions: make(map[string]*Session)}
}

// Register adds s under its id; an id that is already registered is refused.
func (g *Registry) Register(s *Session) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.sessions[s.ID()]; ok {
		return fmt.Errorf("reaper: session %s is already registered", s.ID())
	}
	g.sessions[s.ID()] = s
	return nil
}

// Get returns the session registered under id.
func (g *Registry) Get(id string) (*Session, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sessions[id]
	return s, ok
}

// Len returns the number of registered sessions.
func (g *Registry) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// CloseAndRemove removes the session registered under id and closes it. An unknown id is a no-op.
func (g *Registry) CloseAndRemove(ctx context.Context, id string) (KillReport, error) {
	g.mu.Lock()
	s, ok := g.sessions[id]
	delete(g.sessions, id)
	g.mu.Unlock()
	if !ok {
		return KillReport{}, nil
	}
	return s.Close(ctx)
}

// CloseAll removes and closes every session, in parallel, at most 8 at a time.
func (g *Registry) CloseAll(ctx context.Context) error {
	g.mu.Lock()
	sessions := make([]*Session, 0, len(g.sessions))
	for _, s := range g.sessions {
		sessions = append(sessions, s)
	}
	clear(g.sessions)
	g.mu.Unlock()
	return closeSessions(ctx, sessions)
}
