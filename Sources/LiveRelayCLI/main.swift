// The `liverelay` command arrives with the server issue.
print("liverelay: not built yet")
