from dpllm.cli import main

main()
