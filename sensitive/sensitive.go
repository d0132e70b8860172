// Package sensitive recognises values that must never be written, sent or
// logged: identity numbers, payment cards, secrets, keys and tokens.
package sensitive

// Kind names a kind of sensitive data, for warnings that must not repeat
// the value itself.
type Kind string

// Scan reports whether value holds sensitive data, and of which kind.
// CONTRACT PLACEHOLDER: implemented by the sensitive-data work.
func Scan(value string) (Kind, bool) { return "", false }

// SecretName reports whether an extra label's key (lower-case, '_'-separated)
// names a secret, such as db_password or api_key.
// CONTRACT PLACEHOLDER: implemented by the sensitive-data work.
func SecretName(key string) bool { return false }
