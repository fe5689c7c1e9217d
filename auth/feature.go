package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/auth/jwt"
	"github.com/tollgate/tollgate/pipeline"
)

// Identity is what the route feature `auth` builds its filters from: the
// objects made from the top-level consumers, signature and jwt sections
// (section.go), shared under IdentityKey.
type Identity struct {
	Consumers *Consumers
	Nonces    *NonceStore
	Now       func() time.Time
	Window    time.Duration
	// NewChecker makes the signature checkers; nil for sign.NewVerifier.
	NewChecker func() SigChecker
	// JWT is the snapshot's JWT filter, nil without a jwt section.
	JWT *jwt.Filter
}

// IdentityKey is Identity's key in the build environment.
var IdentityKey = pipeline.NewKey[*Identity]("auth.identity")

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "auth", Stage: pipeline.StageAuth, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(string) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			id, _ := IdentityKey.Get(b.Env)
			switch mode := *cfg.(*string); mode {
			case "", "none":
				return nil, nil
			case "signature":
				if id == nil || id.Consumers.Len() == 0 {
					return nil, errors.New("auth: signature needs consumers")
				}
				return NewSignature(SignatureConfig{Consumers: id.Consumers, Nonces: id.Nonces, Now: id.Now,
					Window: id.Window, Route: b.Route.Name, NewChecker: id.NewChecker}), nil
			case "jwt":
				if id == nil || id.JWT == nil {
					return nil, errors.New("auth: jwt needs the jwt section")
				}
				return id.JWT, nil
			default:
				return nil, fmt.Errorf("auth %q: want signature, jwt or none", mode)
			}
		},
	})
}
