// see docs/here.md and docs/gone.md
