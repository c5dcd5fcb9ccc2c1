// Package iowait holds the wait-list arithmetic of the hfi1 driver's struct iowait that its two
// wait lists share (hfi1: iowait.h's iowait_queue, iowait.c's iowait_priority_update_top): package
// sdma queues IOWaits on an engine's dmawait with it, package pio queues Waiters on a send
// context's piowait. The counts are the kernel's u8s: they wrap at 256. Being internal, it is
// reachable only from inside the module.
package iowait

// PriorityStarveShift is IOWAIT_PRIORITY_STARVE_SHIFT: a priority counts 16 starved queueings.
const PriorityStarveShift = 4

// Starve returns the starved count after a queueing (iowait_queue): 0 for a waiter that sent
// packets in its pass, one more (a u8: 255 wraps to 0) for one that sent none.
func Starve(pktsSent bool, starved uint8) uint8 {
	if pktsSent {
		return 0
	}
	return starved + 1
}

// AtHead reports whether iowait_queue puts the waiter at the head of the list (list_add) rather
// than the tail (list_add_tail): it has a priority, or it sent no packet in its pass.
func AtHead(priority uint8, pktsSent bool) bool { return priority > 0 || !pktsSent }

// Key is the wake-order key of iowait_priority_update_top: priority<<4 + starved count, in u8
// arithmetic (a key of 256 or more wraps, so a priority of 16 ranks as 0). Of a batch, the first
// waiter with the highest key is woken first.
func Key(priority, starved uint8) uint8 { return priority<<PriorityStarveShift + starved }

// UpdateTop is iowait_priority_update_top: idx, the batch index of a waiter with key, becomes the
// top if key is above topKey, the key of the batch's top so far at topIdx (a tie keeps the first).
func UpdateTop(key, topKey uint8, idx, topIdx int) int {
	if key > topKey {
		return idx
	}
	return topIdx
}
