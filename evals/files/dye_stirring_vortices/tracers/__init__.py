"""Tracer advection in a flow made of a few point vortices."""
