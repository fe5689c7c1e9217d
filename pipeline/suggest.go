package pipeline

import "strings"

// DidYouMean returns ` (did you mean "x"?)` when one key known where key
// was written is a small edit away from it, else "".
func DidYouMean(key string, known []string) string {
	best, bestDist := "", 0
	for _, k := range known {
		if k == key {
			continue
		}
		d := editDistance(strings.ToLower(key), strings.ToLower(k))
		if d > maxEdits(key) {
			continue
		}
		if best == "" || d < bestDist || d == bestDist && k < best {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return ` (did you mean "` + best + `"?)`
}

// maxEdits is how far a misspelling may be from the key it stands for:
// short keys are close to many others, so they get fewer edits.
func maxEdits(key string) int {
	switch {
	case len(key) <= 3:
		return 1
	case len(key) <= 8:
		return 2
	}
	return 3
}

// maxCompared bounds the length of what editDistance compares: a key
// longer than any setting is no misspelling of one.
const maxCompared = 64

// editDistance is the number of single-character insertions, deletions,
// substitutions or swaps of neighbours that turn a into b.
func editDistance(a, b string) int {
	if len(a) > maxCompared || len(b) > maxCompared {
		return maxCompared
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
