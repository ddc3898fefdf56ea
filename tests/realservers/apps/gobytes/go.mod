module spinscope/gobytes

go 1.21
