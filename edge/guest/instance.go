package guest

// InstanceCeilingBytes is the most host memory one instantiation of a
// module within the module limits allocates outside the grant: its
// tables' entries, its globals, a function reference for every element
// entry, its data and element instances, its imports' function
// instances (at most MaxInstanceBytes as the scanner estimates them),
// and the instance's own structures and WASI's state, which do not grow
// with the module. The guest's linear memory is not part of it (the
// grant charges it). latentd counts it into the node's memory sizing
// with the call stack (see CheckCallStacks); TestEachLimitsCostAtTheLimit
// holds a module at each limit, and one spending MaxInstanceBytes across
// every section, to it.
const InstanceCeilingBytes = 2 * MaxInstanceBytes
