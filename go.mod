module rpi

go 1.26
