package catalog

// IdentitiesValidated marks a pin as a core.ValidatedRevisionSource:
// every identity it holds obeys the identifier character rules, because
// a deployment is validated when it is compiled and generated identities
// are hex.
func (*Pin) IdentitiesValidated() {}
