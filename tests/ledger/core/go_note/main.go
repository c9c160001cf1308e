// Command opennote opens a signed note with Go's golang.org/x/mod/sumdb/note, as Go's sumdb
// clients and Tessera's tooling do, and prints what it verified: the number of verified and of
// unverified (unknown) signatures, then the note text. Written for tests/ledger/core/test_go_note.py.
//
// Usage: opennote NOTE-FILE VKEY...   (exit 1: the note does not open; exit 2: a bad vkey)
package main

import (
	"fmt"
	"os"

	"golang.org/x/mod/sumdb/note"
)

func main() {
	msg, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Println("read:", err)
		os.Exit(2)
	}
	var verifiers []note.Verifier
	for _, vkey := range os.Args[2:] {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			fmt.Println("verifier:", err)
			os.Exit(2)
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(msg, note.VerifierList(verifiers...))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	fmt.Printf("%d %d\n%s", len(n.Sigs), len(n.UnverifiedSigs), n.Text)
}
