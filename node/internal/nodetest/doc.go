// Package nodetest builds real admission fixtures for the node packages'
// tests: a provider over the shared example policy, an in-memory revision
// source, a fresh load sample and a live-clock controller, so that every
// permit the tests hand downstream comes from a real controller.
package nodetest
