package catalog

// lockFileName is the file in a store directory whose lock an open store
// holds for its lifetime. It is created on first use and never removed:
// removing a lock file would let a second opener lock a new file of the
// same name while the first still holds the old one.
const lockFileName = "catalog.lock"
