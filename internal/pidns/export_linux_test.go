package pidns

// For the external tests (package pidns_test), which use testutil, which imports this package.
var (
	TestOptions = testOptions
	End         = (*Init).end
)
