// Package membarrier is the process-wide memory barrier of membarrier(2)
// (MEMBARRIER_CMD_PRIVATE_EXPEDITED): the rare side of an asymmetric Dekker pair calls Barrier,
// so that the frequent side may leave out its own full fence.
//
// The pattern (the kernel's and liburcu's sys_membarrier use): the frequent side stores X, then
// loads Y, with no fence between (on amd64 a later load may pass an earlier store); the rare
// side stores Y with a locked instruction, calls Barrier, then loads X. Barrier makes every
// running thread of the process execute a full memory barrier before it returns (a thread not
// running passes through the scheduler, which is one), so of the two loads at least one sees the
// other side's store: if the frequent side's load of Y came before its thread's barrier, its
// store of X came before it too and is visible to the rare side's later load; if after, the
// rare side's store of Y, globally visible before Barrier began, is what it loads.
//
// Available reports whether the barrier can be used: only on linux/amd64 (a TSO machine, where
// the frequent side's plain store and load keep their own order otherwise), outside -race and
// purego, and where the kernel supports and accepted the registration. Elsewhere both sides keep
// their fences.
package membarrier
