// Package agents adapts the transports the simulator runs to its
// sim.Transport interface: the MetaRoCE core (transport.Endpoint) and the
// RoCEv2 baseline (rocev2.Endpoint). Host ids are used directly as the
// transports' remote handles.
package agents
