from warpgrad.agent.cli import main

main()
